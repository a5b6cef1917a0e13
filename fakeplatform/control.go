package fakeplatform

import (
	"maps"
	"net/http"
	"slices"
)

// Stats counts what the server did since it started (replayed journal
// entries are not counted, except in JournalSeq).
type Stats struct {
	// Accepted counts journalled operations per op.
	Accepted map[Op]int64 `json:"accepted"`
	// Deduplicated counts sends answered with an existing message because
	// of a repeated idempotency key.
	Deduplicated int64 `json:"deduplicated"`
	// FaultsFired counts operations affected by a fault, per kind.
	FaultsFired map[FaultKind]int64 `json:"faults_fired"`
	// Held is the number of requests parked by a fault right now.
	Held int `json:"held"`
	// JournalSeq is the seq of the last journal entry (0 for none).
	JournalSeq int64 `json:"journal_seq"`
}

func newStats() Stats {
	st := Stats{Accepted: map[Op]int64{}, FaultsFired: map[FaultKind]int64{}}
	for _, op := range AllOps() {
		st.Accepted[op] = 0
	}
	for _, k := range AllFaultKinds() {
		st.FaultsFired[k] = 0
	}
	return st
}

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.stats
	out.Accepted = maps.Clone(s.stats.Accepted)
	out.FaultsFired = maps.Clone(s.stats.FaultsFired)
	out.Held = len(s.held)
	return out
}

// AddFault arms f and returns its id. Matching operations consume the oldest
// armed matching fault first; a fault is disarmed when its count is used up.
func (s *Server) AddFault(f Fault) (int64, error) {
	f, err := f.normalize()
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextFaultID++
	s.faults = append(s.faults, &ArmedFault{ID: s.nextFaultID, Fault: f, Remaining: f.Count})
	return s.nextFaultID, nil
}

// Faults returns the armed faults, oldest first, with their remaining counts.
func (s *Server) Faults() []ArmedFault {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ArmedFault, 0, len(s.faults))
	for _, a := range s.faults {
		out = append(out, *a)
	}
	return out
}

// ClearFaults disarms every fault and returns how many were armed. Requests
// already held stay held (see Release).
func (s *Server) ClearFaults() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.faults)
	s.faults = nil
	return n
}

// Release lets every request held right now go on and returns how many it
// released: hold_before_accept requests are then processed, hold_after_accept
// requests answered, and timeout_before_accept requests dropped without an
// answer. Requests held later are not affected.
func (s *Server) Release() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.held)
	for id, ch := range s.held {
		close(ch)
		delete(s.held, id)
	}
	if n > 0 {
		s.heldChangedLocked()
	}
	return n
}

// takeFault consumes one use of the oldest armed fault matching req.
func (s *Server) takeFault(req opRequest) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, a := range s.faults {
		if !a.Fault.matches(req.op, req.profile.Name, req.chatID) {
			continue
		}
		a.Remaining--
		if a.Remaining <= 0 {
			s.faults = slices.Delete(s.faults, i, i+1)
		}
		s.stats.FaultsFired[a.Fault.Kind]++
		s.log.Info("fault fired", "fault_id", a.ID, "kind", a.Fault.Kind, "op", req.op,
			"profile", req.profile.Name, "chat_id", req.chatID, "remaining", a.Remaining)
		return a.Fault, true
	}
	return Fault{}, false
}

func (s *Server) handleAddFault(w http.ResponseWriter, r *http.Request) {
	var f Fault
	if !decodeBody(w, r, &f) {
		return
	}
	id, err := s.AddFault(f)
	if err != nil { // only ErrInvalidFault
		writeError(w, http.StatusBadRequest, "Bad Request: "+err.Error())
		return
	}
	writeJSON(w, http.StatusCreated, map[string]int64{"id": id})
}

func (s *Server) handleListFaults(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string][]ArmedFault{"faults": s.Faults()})
}

func (s *Server) handleClearFaults(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]int{"cleared": s.ClearFaults()})
}

func (s *Server) handleRelease(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]int{"released": s.Release()})
}

func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.Stats())
}
