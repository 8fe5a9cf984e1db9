module github.com/govkit/breaker/benchmarks

go 1.23

require (
	github.com/cep21/circuit/v4 v4.1.0
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/govkit/breaker v0.1.0
	github.com/mercari/go-circuitbreaker v0.0.2
	github.com/sony/gobreaker/v2 v2.4.0
)

require (
	github.com/benbjohnson/clock v1.3.5 // indirect
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/cenkalti/backoff/v3 v3.1.1 // indirect
)
