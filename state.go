package breaker

import "fmt"

// The state machine, and what the modes do to it:
//
//	                 a trip rule holds
//	    +------------------------------------+
//	    |                                    v
//	  Closed                               Open <------------+
//	    ^                                    |                |
//	    | every probe passed                 | cooldown over  | a probe failed,
//	    |                                    v                | or probe timeout
//	    +------------------------------ HalfOpen -------------+
//
//	ModeAuto          the machine above; refusals return ErrOpen
//	ModeShadow        the same machine, but a refused call is admitted
//	                  and counted off the window (Counters.ShadowRejected)
//	ModeForcedOpen    entered from any state: Open, no cooldown ends it;
//	                  leaving it for ModeAuto or ModeShadow goes to
//	                  HalfOpen (released)
//	ModeForcedClosed  entered from any state: Closed, no rule trips it
//	Reset             from any state to Closed; a forced mode ends

// State is the position of a breaker in its state machine.
type State uint8

const (
	// Closed: calls go through and their outcomes fill the window.
	Closed State = iota
	// Open: calls are refused with ErrOpen until the cooldown ends.
	Open
	// HalfOpen: the next Policy.Probes calls go through as probes, the
	// rest are refused (see the diagram above).
	HalfOpen
)

func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half_open"
	}
	return "state(" + itoa(uint64(s)) + ")"
}

// MarshalText writes the state's name, so states read well in JSON.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a state's name, so a JSON snapshot decodes back.
func (s *State) UnmarshalText(b []byte) error {
	for c := Closed; c <= HalfOpen; c++ {
		if string(b) == c.String() {
			*s = c
			return nil
		}
	}
	return fmt.Errorf("breaker: unknown state %q", b)
}

// Reason says why a transition happened; a trip's names its rule.
type Reason string

const (
	ReasonErrorRatio          Reason = "error_ratio"          // Policy.ErrorRatio reached
	ReasonErrorCount          Reason = "error_count"          // Policy.ErrorCount reached
	ReasonSlowRatio           Reason = "slow_ratio"           // Policy.SlowRatio reached
	ReasonConsecutiveFailures Reason = "consecutive_failures" // Policy.ConsecutiveFailures reached
	ReasonCooldown            Reason = "cooldown_elapsed"     // open → half-open
	ReasonProbesPassed        Reason = "probes_passed"        // half-open → closed
	ReasonProbeFailed         Reason = "probe_failed"         // half-open → open
	ReasonProbeTimeout        Reason = "probe_timeout"        // every slot taken, a probe in flight for a cooldown → open
	ReasonForcedOpen          Reason = "forced_open"          // SetMode(ModeForcedOpen)
	ReasonForcedClosed        Reason = "forced_closed"        // SetMode(ModeForcedClosed)
	ReasonReleased            Reason = "released"             // a forced mode ended
	ReasonReset               Reason = "reset"                // Reset
	// ReasonTimeoutAdapted: not a transition (From equals To); the
	// adaptive timeout changed, as Event.Timeout says.
	ReasonTimeoutAdapted Reason = "timeout_adapted"
)

// Mode is how a breaker applies its state machine. The zero value,
// ModeAuto, is normal operation.
type Mode uint8

const (
	// ModeAuto: the breaker trips, refuses and recovers on its own.
	ModeAuto Mode = iota
	// ModeShadow: the breaker runs and reports as in ModeAuto but refuses
	// nothing: calls it would refuse are counted in ShadowRejected and
	// left out of the window. Use it to try a policy on live traffic.
	ModeShadow
	// ModeForcedOpen: every call is refused until the mode changes;
	// leaving it goes to half-open.
	ModeForcedOpen
	// ModeForcedClosed: every call is admitted and measured; it never trips.
	ModeForcedClosed
)

func (m Mode) String() string {
	switch m {
	case ModeAuto:
		return "auto"
	case ModeShadow:
		return "shadow"
	case ModeForcedOpen:
		return "forced_open"
	case ModeForcedClosed:
		return "forced_closed"
	}
	return "mode(" + itoa(uint64(m)) + ")"
}

// MarshalText writes the mode's name.
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText reads a mode's name.
func (m *Mode) UnmarshalText(b []byte) error {
	for c := ModeAuto; c <= ModeForcedClosed; c++ {
		if string(b) == c.String() {
			*m = c
			return nil
		}
	}
	return fmt.Errorf("breaker: unknown mode %q", b)
}
