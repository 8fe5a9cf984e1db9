package main

import (
	"context"
	"errors"
	"fmt"
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

func parseFault(s string) (fault, bool) {
	for f, name := range faultNames {
		if name == s {
			return fault(f), true
		}
	}
	return 0, false
}

var (
	errUnavailable = errors.New("503 service unavailable")
	errUnknownSKU  = errors.New("unknown sku")
)

// downstream is the fault switch shared by the fakes.
type downstream struct {
	name  string
	fault atomic.Int32
}

func (d *downstream) set(f fault) { d.fault.Store(int32(f)) }
func (d *downstream) get() fault  { return fault(d.fault.Load()) }

// call plays one call: nil when the downstream is healthy.
func (d *downstream) call(ctx context.Context) error {
	switch d.get() {
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
