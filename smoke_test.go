package breaker

import (
	"context"
	"errors"
	"github.com/benbjohnson/clock"
	"testing"
	"time"
)

func TestSmoke_TripProbeClose(t *testing.T) {
	mc := clock.NewMock()
	var evs []Event
	b, err := New("inv.Get", DefaultPolicy(), WithClock(mc), WithRand(func() float64 { return 0.5 }), OnTransition(func(e Event) { evs = append(evs, e) }))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	boom := errors.New("boom")
	for i := 0; i < 10; i++ {
		_ = b.Do(ctx, func(context.Context) error { return nil })
	}
	for i := 0; i < 9; i++ {
		_ = b.Do(ctx, func(context.Context) error { return boom })
	}
	if b.State() != Closed {
		t.Fatal("tripped at 19")
	}
	_ = b.Do(ctx, func(context.Context) error { return boom })
	if b.State() != Open {
		t.Fatalf("not open at 20: %+v", b.Snapshot())
	}
	err = b.Do(ctx, func(context.Context) error { return nil })
	var oe *OpenError
	if !errors.As(err, &oe) || !errors.Is(err, ErrOpen) {
		t.Fatal(err)
	}
	t.Log(err, oe.RetryAfter())
	mc.Add(30*time.Second - 1)
	if b.State() != Open {
		t.Fatal("early")
	}
	mc.Add(1)
	if b.State() != HalfOpen {
		t.Fatal("not half")
	}
	for i := 0; i < 3; i++ {
		if err := b.Do(ctx, func(c context.Context) error {
			if !IsProbe(c) {
				t.Error("not probe")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if b.State() != Closed {
		t.Fatal("not closed")
	}
	for _, e := range evs {
		t.Logf("%s %s->%s %s %+v cd=%v", e.Name, e.From, e.To, e.Reason, e.Snapshot, e.Cooldown)
	}
	t.Logf("%+v", b.Counters())
}
