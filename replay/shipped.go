package replay

import (
	"embed"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
)

//go:embed scenarios/*.json
var shipped embed.FS

// DefaultScenario is the name of the replay of the incident behind the
// breaker's defaults, the one the command runs when given no scenario.
const DefaultScenario = "seeds000"

// ScenarioNames returns the names of the shipped scenarios, sorted.
func ScenarioNames() []string {
	entries, err := shipped.ReadDir("scenarios")
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".json"))
	}
	sort.Strings(names)
	return names
}

// LoadScenario returns a fresh copy of the shipped scenario called name,
// free to change before it is run.
func LoadScenario(name string) (*Scenario, error) {
	data, err := ScenarioJSON(name)
	if err != nil {
		return nil, err
	}
	s, err := ParseScenario(data)
	if err != nil {
		return nil, fmt.Errorf("replay: shipped scenario %s: %w", name, err)
	}
	return s, nil
}

// ScenarioJSON returns the JSON document of the shipped scenario called
// name: a starting point for writing one's own.
func ScenarioJSON(name string) ([]byte, error) {
	if name == "" || strings.ContainsAny(name, `/\.`) {
		return nil, fmt.Errorf("replay: no shipped scenario %q (have %s)", name, strings.Join(ScenarioNames(), ", "))
	}
	data, err := shipped.ReadFile(path.Join("scenarios", name+".json"))
	if err != nil {
		return nil, fmt.Errorf("replay: no shipped scenario %q (have %s)", name, strings.Join(ScenarioNames(), ", "))
	}
	return data, nil
}

// WriteScenarioList writes one entry per shipped scenario: its name and the
// first sentence of its description, wrapped.
func WriteScenarioList(w io.Writer) error {
	for _, name := range ScenarioNames() {
		s, err := LoadScenario(name)
		if err != nil {
			return err
		}
		summary := s.Description
		if i := strings.Index(summary, ". "); i >= 0 {
			summary = summary[:i+1]
		}
		for i, line := range wrap(summary, 64) {
			label := ""
			if i == 0 {
				label = name
			}
			if _, err := fmt.Fprintf(w, "%-12s  %s\n", label, line); err != nil {
				return err
			}
		}
	}
	return nil
}
