package outbox

// State is where an obligation stands in the delivery protocol (SPEC §4).
// Every move between states is one conditional UPDATE on (id, state, fencing
// token) whose row count is checked.
type State string

const (
	// StatePending: recorded, never claimed. Record moves a row in; a claim
	// moves it out (to attempting), or the age limit (to abandoned).
	StatePending State = "pending"
	// StateAttempting: claimed by an owner whose lease has not been given up.
	// A claim moves a row in (from pending or failed, or from attempting when
	// the previous owner is dead or its lease expired); Settle moves it out.
	StateAttempting State = "attempting"
	// StateDelivered: the platform acknowledged it; platform_message_id is
	// set. Terminal: the row never changes again.
	StateDelivered State = "delivered"
	// StateFailed: the last attempt failed and another is allowed after
	// next_attempt_at. Settle moves a row in; a claim moves it out, or the age
	// limit (to abandoned).
	StateFailed State = "failed"
	// StateAbandoned: given up, with the cause in error — a permanent
	// platform error, the attempt budget or the age limit. Terminal.
	StateAbandoned State = "abandoned"
)

// AllStates returns every state, in protocol order. The schema's CHECK
// constraint lists the same set (a test keeps them equal).
func AllStates() []State {
	return []State{StatePending, StateAttempting, StateDelivered, StateFailed, StateAbandoned}
}

// Terminal reports whether s is a state a row never leaves.
func (s State) Terminal() bool { return s == StateDelivered || s == StateAbandoned }

// Valid reports whether s is one of AllStates.
func (s State) Valid() bool {
	for _, v := range AllStates() {
		if s == v {
			return true
		}
	}
	return false
}
