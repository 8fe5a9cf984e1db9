package breakerotel_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/govkit/breaker"
	"github.com/govkit/breaker/breakerotel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func ExampleRegister() {
	g, err := breaker.NewGroup(breaker.GroupConfig{})
	if err != nil {
		panic(err)
	}
	// A manual reader stands in for an exporter; with an OTLP exporter use
	// sdkmetric.NewPeriodicReader(exporter) instead.
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	m, err := breakerotel.Register(g, mp)
	if err != nil {
		panic(err)
	}
	defer m.Unregister()

	failing := func(context.Context) error { return errors.New("pricing: 503") }
	for i := 0; i < breaker.DefaultPolicy().MinRequests; i++ {
		_ = g.Do(context.Background(), "pricing.GetPrice", failing)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, metric := range sm.Metrics {
			if metric.Name != "breaker.transitions" {
				continue
			}
			// Every transition the breaker can make is there, at 0
			// until it is made; print the ones made.
			for _, p := range metric.Data.(metricdata.Sum[int64]).DataPoints {
				if p.Value == 0 {
					continue
				}
				from, _ := p.Attributes.Value(breakerotel.KeyTransitionFrom)
				to, _ := p.Attributes.Value(breakerotel.KeyTransitionTo)
				reason, _ := p.Attributes.Value(breakerotel.KeyTransitionReason)
				fmt.Println(metric.Name, metric.Unit, from.Emit(), "->", to.Emit(), reason.Emit(), p.Value)
			}
		}
	}
	// Output:
	// breaker.transitions {transition} closed -> open error_ratio 1
}
