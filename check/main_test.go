package check

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// long says whether to run the long variants of the tests: the property
// tests with rapid's own number of checks under the race detector too.
// scripts/stress.sh sets it.
var long = os.Getenv("BREAKER_LONG") != ""
