"""What every part of the Envoy config shares: envoy-data-plane's types imported quietly, and the
small typed values (an address, a duration, a packed `Any`) the configs are built from."""

from __future__ import annotations

import datetime
import ipaddress
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import betterproto2


@contextmanager
def quiet_library_imports() -> Iterator[None]:
    """envoy-data-plane's generated models trip pydantic deprecation warnings on import; they are
    the library's, not ours, and would otherwise flood every test run. Import them under this."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


with quiet_library_imports():
    from envoy_data_plane.envoy.config.core.v3 import Address, SocketAddress
    from envoy_data_plane.google.protobuf import Any as AnyMessage


def socket_address(host: str, port: int) -> Address:
    return Address(socket_address=SocketAddress(address=host, port_value=port))


def is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def duration(seconds: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=seconds)


def typed(message: betterproto2.Message) -> AnyMessage:
    return AnyMessage.pack(message)
