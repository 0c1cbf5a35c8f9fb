"""The clusters: the ext_proc server's, one per upstream, the tracing collector's, the undecided one."""

from __future__ import annotations

from extproc.ops.envoy_config.messages import duration, is_ip, quiet_library_imports, socket_address, typed
from extproc.ops.envoy_config.options import (
    EXT_PROC_CLUSTER,
    OTEL_COLLECTOR_CLUSTER,
    UNDECIDED_CLUSTER,
    EnvoyOptions,
    EnvoyTracing,
    MiB,
    Upstream,
)

with quiet_library_imports():
    from envoy_data_plane.envoy.config.cluster.v3 import (
        CircuitBreakers,
        CircuitBreakersThresholds,
        Cluster,
        ClusterDiscoveryType,
    )
    from envoy_data_plane.envoy.config.core.v3 import HealthCheck, HealthCheckGrpcHealthCheck, Http2ProtocolOptions
    from envoy_data_plane.envoy.config.endpoint.v3 import (
        ClusterLoadAssignment,
        Endpoint,
        LbEndpoint,
        LocalityLbEndpoints,
    )
    from envoy_data_plane.envoy.extensions.upstreams.http.v3 import (
        HttpProtocolOptions,
        HttpProtocolOptionsExplicitHttpConfig,
    )


def ext_proc_cluster(options: EnvoyOptions) -> Cluster:
    """The gRPC (HTTP/2) cluster of ext_proc server replicas, health-checked over gRPC health."""
    cluster = Cluster(
        name=EXT_PROC_CLUSTER,
        type=ClusterDiscoveryType.STATIC if is_ip(options.ext_proc_host) else ClusterDiscoveryType.STRICT_DNS,
        connect_timeout=duration(1.0),
        # Image bodies travel in one gRPC message each way.
        per_connection_buffer_limit_bytes=32 * MiB,
        typed_extension_protocol_options={
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": typed(
                HttpProtocolOptions(
                    explicit_http_config=HttpProtocolOptionsExplicitHttpConfig(
                        http2_protocol_options=Http2ProtocolOptions()
                    )
                )
            )
        },
        # Every HTTP request is one ext_proc stream: lift the default 1024 concurrent-request cap.
        circuit_breakers=CircuitBreakers(
            thresholds=[CircuitBreakersThresholds(max_requests=100_000, max_pending_requests=100_000)]
        ),
        load_assignment=ClusterLoadAssignment(
            cluster_name=EXT_PROC_CLUSTER,
            endpoints=[
                LocalityLbEndpoints(
                    lb_endpoints=[
                        LbEndpoint(
                            endpoint=Endpoint(address=socket_address(options.ext_proc_host, options.ext_proc_port))
                        )
                    ]
                )
            ],
        ),
    )
    if options.health_check:
        cluster.health_checks = [
            HealthCheck(
                timeout=duration(1.0),
                interval=duration(2.0),
                unhealthy_threshold=2,
                healthy_threshold=1,
                grpc_health_check=HealthCheckGrpcHealthCheck(
                    service_name="envoy.service.ext_proc.v3.ExternalProcessor"
                ),
            )
        ]
    return cluster


def upstream_cluster(upstream: Upstream, options: EnvoyOptions) -> Cluster:
    return Cluster(
        name=upstream.cluster,
        type=ClusterDiscoveryType.STATIC if is_ip(upstream.host) else ClusterDiscoveryType.STRICT_DNS,
        connect_timeout=duration(5.0),
        per_connection_buffer_limit_bytes=options.buffer_limit_bytes,
        load_assignment=ClusterLoadAssignment(
            cluster_name=upstream.cluster,
            endpoints=[
                LocalityLbEndpoints(
                    lb_endpoints=[LbEndpoint(endpoint=Endpoint(address=socket_address(upstream.host, upstream.port)))]
                )
            ],
        ),
    )


def collector_cluster(tracing: EnvoyTracing) -> Cluster:
    """The OTLP/gRPC (HTTP/2) collector Envoy exports its spans to."""
    return Cluster(
        name=OTEL_COLLECTOR_CLUSTER,
        type=ClusterDiscoveryType.STATIC if is_ip(tracing.collector_host) else ClusterDiscoveryType.STRICT_DNS,
        connect_timeout=duration(1.0),
        typed_extension_protocol_options={
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": typed(
                HttpProtocolOptions(
                    explicit_http_config=HttpProtocolOptionsExplicitHttpConfig(
                        http2_protocol_options=Http2ProtocolOptions()
                    )
                )
            )
        },
        load_assignment=ClusterLoadAssignment(
            cluster_name=OTEL_COLLECTOR_CLUSTER,
            endpoints=[
                LocalityLbEndpoints(
                    lb_endpoints=[
                        LbEndpoint(
                            endpoint=Endpoint(address=socket_address(tracing.collector_host, tracing.collector_port))
                        )
                    ]
                )
            ],
        ),
    )


def undecided_cluster() -> Cluster:
    """No hosts: Envoy answers "no healthy upstream", which `local_reply` turns into a 400."""
    return Cluster(
        name=UNDECIDED_CLUSTER,
        type=ClusterDiscoveryType.STATIC,
        connect_timeout=duration(1.0),
        load_assignment=ClusterLoadAssignment(cluster_name=UNDECIDED_CLUSTER, endpoints=[]),
    )
