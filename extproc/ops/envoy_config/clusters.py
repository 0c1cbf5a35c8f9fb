"""The clusters: the ext_proc server's, one per upstream, the failover aggregates, the tracing
collector's, the undecided one.

Model upstreams are health-checked (vLLM's `GET /health`) and have outlier detection (consecutive
5xx and gateway failures eject a host), so Envoy stops sending to a server that is down before
the router's own cooldown notices. A failover aggregate (`envoy.clusters.aggregate`) lists the
chosen model's cluster, then its fallback's: Envoy sends to the first while it has healthy hosts
and spills to the second when it does not; the route's retry policy (`routing.failover_retry`)
retries a failed attempt on the next priority, so the request that fails is answered by the
fallback without the client seeing the error.
"""

from __future__ import annotations

from extproc.ops.envoy_config.messages import duration, is_ip, quiet_library_imports, socket_address, typed
from extproc.ops.envoy_config.options import (
    EXT_PROC_CLUSTER,
    OTEL_COLLECTOR_CLUSTER,
    UNDECIDED_CLUSTER,
    UPSTREAM_HEALTH_PATH,
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
        ClusterCustomClusterType,
        ClusterDiscoveryType,
        ClusterLbPolicy,
        OutlierDetection,
    )
    from envoy_data_plane.envoy.config.core.v3 import (
        HealthCheck,
        HealthCheckGrpcHealthCheck,
        HealthCheckHttpHealthCheck,
        Http2ProtocolOptions,
    )
    from envoy_data_plane.envoy.config.endpoint.v3 import (
        ClusterLoadAssignment,
        Endpoint,
        LbEndpoint,
        LocalityLbEndpoints,
    )
    from envoy_data_plane.envoy.extensions.clusters.aggregate.v3 import ClusterConfig as AggregateClusterConfig
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
    if upstream.kind == "failover":
        return failover_cluster(upstream)
    cluster = Cluster(
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
    if upstream.kind == "model" and options.upstream_health:
        cluster.health_checks = [
            HealthCheck(
                timeout=duration(1.0),
                interval=duration(options.upstream_health_interval_s),
                unhealthy_threshold=2,
                healthy_threshold=1,
                http_health_check=HealthCheckHttpHealthCheck(path=UPSTREAM_HEALTH_PATH),
            )
        ]
        cluster.outlier_detection = OutlierDetection(
            consecutive_5xx=5,
            consecutive_gateway_failure=2,
            interval=duration(2.0),
            base_ejection_time=duration(15.0),
            max_ejection_percent=100,  # one host per cluster: it may be ejected; the aggregate spills over
        )
    return cluster


def failover_cluster(upstream: Upstream) -> Cluster:
    """An aggregate over `upstream.members` in priority order (the chosen model's cluster first)."""
    return Cluster(
        name=upstream.cluster,
        connect_timeout=duration(5.0),
        lb_policy=ClusterLbPolicy.CLUSTER_PROVIDED,
        cluster_type=ClusterCustomClusterType(
            name="envoy.clusters.aggregate",
            typed_config=typed(AggregateClusterConfig(clusters=list(upstream.members))),
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
