package extproc_test

import (
	"encoding/json"
	"os"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	headermutationv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_mutation/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"gopkg.in/yaml.v3"

	"github.com/eppkit/eppkit/requestcontrol"
)

// TestEnvoySample loads envoy.yaml (the sample of docs/production.md) into
// Envoy's Bootstrap proto, strictly (an unknown or misspelt field fails),
// runs Envoy's own validation rules, and checks that it is wired the way
// the picker needs.
func TestEnvoySample(t *testing.T) {
	data, err := os.ReadFile("envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var bs bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &bs); err != nil {
		t.Fatalf("envoy.yaml is not a valid Bootstrap: %v", err)
	}
	if err := bs.ValidateAll(); err != nil {
		t.Fatalf("envoy.yaml fails Envoy's validation: %v", err)
	}

	clusters := map[string]*clusterv3.Cluster{}
	for _, c := range bs.GetStaticResources().GetClusters() {
		clusters[c.GetName()] = c
	}
	if len(bs.GetStaticResources().GetListeners()) != 1 {
		t.Fatalf("want one listener")
	}
	hcm := &hcmv3.HttpConnectionManager{}
	if err := networkFilter(t, bs.GetStaticResources().GetListeners()[0]).GetTypedConfig().UnmarshalTo(hcm); err != nil {
		t.Fatal(err)
	}

	// The filters: strip the client's destination header, then the picker,
	// then the router.
	filters := hcm.GetHttpFilters()
	if len(filters) != 3 {
		t.Fatalf("http_filters: got %d, want header_mutation, ext_proc, router", len(filters))
	}
	hm := &headermutationv3.HeaderMutation{}
	if err := filters[0].GetTypedConfig().UnmarshalTo(hm); err != nil {
		t.Fatalf("first filter is not header_mutation: %v", err)
	}
	if rm := hm.GetMutations().GetRequestMutations(); len(rm) != 1 || rm[0].GetRemove() != requestcontrol.HeaderDestination {
		t.Errorf("header_mutation does not remove %s: %v", requestcontrol.HeaderDestination, rm)
	}
	ep := &extprocfilterv3.ExternalProcessor{}
	if err := filters[1].GetTypedConfig().UnmarshalTo(ep); err != nil {
		t.Fatalf("second filter is not ext_proc: %v", err)
	}
	pm := ep.GetProcessingMode()
	full, send := extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED, extprocfilterv3.ProcessingMode_SEND
	if pm.GetRequestBodyMode() != full || pm.GetResponseBodyMode() != full {
		t.Errorf("body modes %v/%v, want FULL_DUPLEX_STREAMED both ways", pm.GetRequestBodyMode(), pm.GetResponseBodyMode())
	}
	if pm.GetRequestHeaderMode() != send || pm.GetResponseHeaderMode() != send ||
		pm.GetRequestTrailerMode() != send || pm.GetResponseTrailerMode() != send {
		t.Errorf("header and trailer modes must be SEND (FULL_DUPLEX_STREAMED requires trailers): %v", pm)
	}
	if ep.GetFailureModeAllow() {
		t.Error("the sample is FailClose: failure_mode_allow must be false")
	}
	picker := clusters[ep.GetGrpcService().GetEnvoyGrpc().GetClusterName()]
	if picker == nil {
		t.Fatalf("ext_proc's cluster %q is not defined", ep.GetGrpcService().GetEnvoyGrpc().GetClusterName())
	}
	addr := picker.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	if addr.GetPortValue() != 9002 { // eppkit-extproc's default --grpc-listen
		t.Errorf("picker cluster port %d, want 9002", addr.GetPortValue())
	}
	if picker.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"] == nil {
		t.Error("the picker cluster must speak HTTP/2 (gRPC)")
	}
	if hc := picker.GetHealthChecks(); len(hc) == 0 ||
		hc[0].GetGrpcHealthCheck().GetServiceName() != extprocv3.ExternalProcessor_ServiceDesc.ServiceName {
		t.Errorf("picker health check: %v", hc)
	}

	// The first route goes where the picker said, through an ORIGINAL_DST
	// cluster keyed on its header.
	routes := hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()
	if len(routes) != 2 {
		t.Fatalf("want the picked route and the FailOpen route, got %d", len(routes))
	}
	if h := routes[0].GetMatch().GetHeaders(); len(h) != 1 || h[0].GetName() != requestcontrol.HeaderDestination || !h[0].GetPresentMatch() {
		t.Errorf("first route must match on the destination header being present: %v", h)
	}
	dst := clusters[routes[0].GetRoute().GetCluster()]
	if dst == nil {
		t.Fatalf("route cluster %q is not defined", routes[0].GetRoute().GetCluster())
	}
	if dst.GetType() != clusterv3.Cluster_ORIGINAL_DST || dst.GetLbPolicy() != clusterv3.Cluster_CLUSTER_PROVIDED {
		t.Errorf("picked-endpoint cluster: type %v, lb %v; want ORIGINAL_DST, CLUSTER_PROVIDED", dst.GetType(), dst.GetLbPolicy())
	}
	if o := dst.GetOriginalDstLbConfig(); !o.GetUseHttpHeader() || o.GetHttpHeaderName() != requestcontrol.HeaderDestination {
		t.Errorf("original_dst_lb_config = %v, want use_http_header on %s", o, requestcontrol.HeaderDestination)
	}
	if clusters[routes[1].GetRoute().GetCluster()] == nil {
		t.Errorf("FailOpen route cluster %q is not defined", routes[1].GetRoute().GetCluster())
	}
}

// networkFilter returns the listener's only network filter.
func networkFilter(t *testing.T, l *listenerv3.Listener) *listenerv3.Filter {
	t.Helper()
	if len(l.GetFilterChains()) != 1 || len(l.GetFilterChains()[0].GetFilters()) != 1 {
		t.Fatalf("listener %s: want one filter chain with one filter", l.GetName())
	}
	return l.GetFilterChains()[0].GetFilters()[0]
}
