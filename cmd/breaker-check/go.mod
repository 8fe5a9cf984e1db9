module github.com/govkit/breaker/cmd/breaker-check

go 1.23

require (
	github.com/govkit/breaker v0.1.0
	github.com/govkit/breaker/replay v0.1.0
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
)

require (
	github.com/benbjohnson/clock v1.3.5 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
