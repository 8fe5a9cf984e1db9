module github.com/govkit/breaker

go 1.22

require github.com/benbjohnson/clock v1.3.5
