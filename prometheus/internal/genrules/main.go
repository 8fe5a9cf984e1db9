// Command genrules writes rules/breaker-alerts.yml, the alerting rules the
// module ships: breakerprom.AlertRules with the default AlertConfig. Run
// it with go generate from the module's directory; a test fails when the
// file and the function disagree.
package main

import (
	"log"
	"os"

	breakerprom "github.com/govkit/breaker/prometheus"
)

func main() {
	rules, err := breakerprom.AlertRules(breakerprom.AlertConfig{})
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("rules/breaker-alerts.yml", rules, 0o644); err != nil {
		log.Fatal(err)
	}
}
