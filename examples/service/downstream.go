package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// The downstreams are in-process fakes so that the example runs alone; in
// a real service they are RPC or HTTP clients, and nothing else changes.

// fault is what a fake downstream does on every call.
type fault int32

const (
	healthy fault = iota
	failing       // answers at once with an error (a 503)
	slow          // answers after slowFor, unless the caller's deadline comes first
)

// slowFor is how long a slow downstream takes to answer: longer than the
// pricing breaker's timeout, so a slow call counts as a timeout.
const slowFor = time.Second

// faultNames are the names the /faults endpoint takes, by fault.
var faultNames = [...]string{healthy: "ok", failing: "error", slow: "slow"}

func (f fault) String() string {
	if f >= 0 && int(f) < len(faultNames) {
		return faultNames[f]
	}
	return fmt.Sprintf("fault(%d)", int32(f))
}

// setting is a fault and the share of the calls it hits, in (0, 1]: the
// value of a downstream's switch. error:0.7 fails 7 calls of every 10,
// spread evenly (the 1st, 2nd, 3rd, 5th, 6th, 8th and 9th), the others
// answering as a healthy downstream; error alone is error:1. ok takes no
// share.
type setting struct {
	fault fault
	share float64
}

func (s setting) String() string {
	if s.fault == healthy || s.share >= 1 {
		return s.fault.String()
	}
	return s.fault.String() + ":" + strconv.FormatFloat(s.share, 'g', -1, 64)
}

// parseSetting reads a switch's value, "ok", "error", "slow", or
// "error:0.7", "slow:0.25" for a share of the calls; the error names what
// is wrong.
func parseSetting(v string) (setting, error) {
	name, share, partial := strings.Cut(v, ":")
	var f fault
	found := false
	for i, n := range faultNames {
		if n == name {
			f, found = fault(i), true
		}
	}
	if !found {
		return setting{}, fmt.Errorf("unknown fault %q: want ok, error or slow, the last two with an optional :share such as error:0.7", name)
	}
	s := setting{fault: f, share: 1}
	if !partial {
		return s, nil
	}
	if f == healthy {
		return setting{}, fmt.Errorf("fault %q: ok takes no share", v)
	}
	p, err := strconv.ParseFloat(share, 64)
	if err != nil || !(p > 0 && p <= 1) {
		return setting{}, fmt.Errorf("fault %q: the share must be a number in (0, 1], such as 0.7", v)
	}
	s.share = p
	return s, nil
}

var (
	errUnavailable = errors.New("503 service unavailable")
	errUnknownSKU  = errors.New("unknown sku")
)

// downstream is the fault switch shared by the fakes.
type downstream struct {
	name    string
	setting atomic.Pointer[setting] // nil: healthy
	calls   atomic.Uint64           // calls since the switch was last set
}

func (d *downstream) set(s setting) {
	d.setting.Store(&s)
	d.calls.Store(0)
}

func (d *downstream) get() setting {
	if s := d.setting.Load(); s != nil {
		return *s
	}
	return setting{fault: healthy, share: 1}
}

// hit reports whether the fault of s hits the nth call (from 0) since the
// switch was set: the calls where hits(n), the hits among the first n
// calls, goes up, so that every run of calls gets its share give or take
// one, and the first call is hit.
func (s setting) hit(n uint64) bool {
	return s.share >= 1 || s.hits(n+1) > s.hits(n)
}

// hits is ceil(n·share), the float product's rounding error (10·0.7 is
// 7.000000000000001) taken out.
func (s setting) hits(n uint64) uint64 {
	return uint64(math.Ceil(float64(n)*s.share - 1e-9))
}

// call plays one call: nil when the downstream answers as a healthy one.
func (d *downstream) call(ctx context.Context) error {
	s := d.get()
	if s.fault == healthy || !s.hit(d.calls.Add(1)-1) {
		return ctx.Err()
	}
	switch s.fault {
	case failing:
		return fmt.Errorf("%s: %w", d.name, errUnavailable)
	case slow:
		t := time.NewTimer(slowFor)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", d.name, ctx.Err())
		}
	}
	return ctx.Err()
}

type product struct {
	stock     int
	price     int64 // cents, from the pricing service
	listPrice int64 // cents, printed in the catalogue: the fallback
}

var catalogue = map[string]product{
	"42":  {stock: 7, price: 1899, listPrice: 1999},
	"108": {stock: 0, price: 4500, listPrice: 4500},
}

// inventoryClient stands for the client of the inventory service.
type inventoryClient struct{ downstream }

// GetStock returns the number of items of sku in stock.
func (c *inventoryClient) GetStock(ctx context.Context, sku string) (int, error) {
	if err := c.call(ctx); err != nil {
		return 0, err
	}
	p, ok := catalogue[sku]
	if !ok {
		return 0, fmt.Errorf("inventory: %w %q", errUnknownSKU, sku)
	}
	return p.stock, nil
}

// pricingClient stands for the client of the pricing service.
type pricingClient struct{ downstream }

// GetPrice returns the current price of sku in cents.
func (c *pricingClient) GetPrice(ctx context.Context, sku string) (int64, error) {
	if err := c.call(ctx); err != nil {
		return 0, err
	}
	p, ok := catalogue[sku]
	if !ok {
		return 0, fmt.Errorf("pricing: %w %q", errUnknownSKU, sku)
	}
	return p.price, nil
}
