package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"herald/cron"
)

// jobRequest is the body of POST /v1/jobs and PATCH /v1/jobs/{id}: absent
// fields keep their value (PATCH) or default (POST). Durations are Go
// duration text ("10m", "1h30m").
type jobRequest struct {
	Name             *string       `json:"name"`
	Spec             *string       `json:"spec"`
	Zone             *string       `json:"zone"`
	Anchor           *time.Time    `json:"anchor"`
	Action           *cron.Action  `json:"action"`
	Platform         *string       `json:"platform"`
	ChatID           *string       `json:"chat_id"`
	CatchUp          *cron.CatchUp `json:"catchup"`
	CatchUpCap       *int          `json:"catchup_cap"`
	Grace            *Duration     `json:"grace"`
	Budget           *Duration     `json:"budget"`
	RerunInterrupted *bool         `json:"rerun_interrupted"`
	Paused           *bool         `json:"paused"`
}

func (r jobRequest) def() cron.JobDef {
	d := cron.JobDef{Name: r.Name, Spec: r.Spec, Zone: r.Zone, Anchor: r.Anchor, Action: r.Action, Platform: r.Platform,
		ChatID: r.ChatID, CatchUp: r.CatchUp, CatchUpCap: r.CatchUpCap, RerunInterrupted: r.RerunInterrupted, Paused: r.Paused}
	if r.Grace != nil {
		g := time.Duration(*r.Grace)
		d.Grace = &g
	}
	if r.Budget != nil {
		b := time.Duration(*r.Budget)
		d.Budget = &b
	}
	return d
}

// jobView is the JSON shape of a job.
type jobView struct {
	ID               int64       `json:"id"`
	Name             string      `json:"name"`
	Spec             string      `json:"spec"`
	Zone             string      `json:"zone"`
	EffectiveZone    string      `json:"effective_zone"`
	Anchor           string      `json:"anchor"`
	Action           cron.Action `json:"action"`
	Platform         string      `json:"platform"`
	ChatID           string      `json:"chat_id"`
	CatchUp          string      `json:"catchup"`
	CatchUpCap       int         `json:"catchup_cap"`
	Grace            string      `json:"grace"`
	Budget           string      `json:"budget"`
	RerunInterrupted bool        `json:"rerun_interrupted"`
	Paused           bool        `json:"paused"`
	NextRunAt        *string     `json:"next_run_at"`
	NextRunLocal     *string     `json:"next_run_local"`
	Missed           int         `json:"missed"`
	LastMissedAt     *string     `json:"last_missed_at"`
	LastMissedReason *string     `json:"last_missed_reason"`
	CreatedAt        string      `json:"created_at"`
	UpdatedAt        string      `json:"updated_at"`
}

func optTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := rfc3339(t)
	return &s
}

func (g *Gateway) jobViewOf(j cron.Job) jobView {
	v := jobView{
		ID: j.ID, Name: j.Name, Spec: j.Spec, Zone: j.Zone, Anchor: rfc3339(j.Anchor), Action: j.Action,
		Platform: j.Platform, ChatID: j.ChatID, CatchUp: string(j.CatchUp), CatchUpCap: j.CatchUpCap,
		Budget: j.Budget.String(), RerunInterrupted: j.RerunInterrupted, Paused: j.Paused,
		NextRunAt: optTime(j.NextRunAt), Missed: j.Missed, LastMissedAt: optTime(j.LastMissedAt),
		LastMissedReason: nullable(j.LastMissedReason), CreatedAt: rfc3339(j.CreatedAt), UpdatedAt: rfc3339(j.UpdatedAt),
	}
	if sched, err := g.sched.ScheduleOf(j); err == nil {
		v.EffectiveZone = sched.Location().String()
		v.Grace = g.sched.GraceFor(j, sched).String()
		if !j.NextRunAt.IsZero() {
			local := j.NextRunAt.In(sched.Location()).Format(localFormat)
			v.NextRunLocal = &local
		}
	}
	return v
}

// executionView is the JSON shape of an execution.
type executionView struct {
	ID         int64   `json:"id"`
	JobID      int64   `json:"job_id"`
	Kind       string  `json:"kind"`
	Slot       string  `json:"slot"`
	State      string  `json:"state"`
	Cause      *string `json:"cause"`
	LateMS     int64   `json:"late_ms"`
	CatchUp    bool    `json:"catchup"`
	Owner      *string `json:"owner"`
	ClaimedAt  string  `json:"claimed_at"`
	StartedAt  *string `json:"started_at"`
	FinishedAt *string `json:"finished_at"`
	Output     string  `json:"output"`
	Truncated  bool    `json:"truncated"`
	MessageID  *int64  `json:"message_id"`
}

func executionViewOf(e cron.Execution) executionView {
	v := executionView{
		ID: e.ID, JobID: e.JobID, Kind: string(e.Kind), Slot: rfc3339(e.Slot), State: string(e.State),
		Cause: nullable(e.Cause), LateMS: e.Late.Milliseconds(), CatchUp: e.CatchUp, Owner: nullable(e.Owner),
		ClaimedAt: rfc3339(e.ClaimedAt), StartedAt: optTime(e.StartedAt), FinishedAt: optTime(e.FinishedAt),
		Output: e.Output, Truncated: e.Truncated,
	}
	if e.MessageID != 0 {
		v.MessageID = &e.MessageID
	}
	return v
}

func (g *Gateway) jobRoutes(r chi.Router) {
	r.Post("/jobs", g.createJob)
	r.Get("/jobs", g.listJobs)
	r.Get("/jobs/{job}", g.getJob)
	r.Patch("/jobs/{job}", g.patchJob)
	r.Delete("/jobs/{job}", g.deleteJob)
	r.Post("/jobs/{job}/run", g.runJob)
	r.Get("/jobs/{job}/executions", g.listExecutions)
	r.Get("/jobs/{job}/preview", g.previewJob)
	r.Get("/debug/settled", g.settled)
}

func decodeStrict(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &httpError{http.StatusRequestEntityTooLarge, "body_too_large", fmt.Errorf("request body exceeds the limit of %d bytes", tooBig.Limit)}
		}
		return badRequest("malformed_json", "request body is not a valid object: %v", err)
	}
	if dec.More() {
		return badRequest("malformed_json", "request body has data after the JSON object")
	}
	return nil
}

// jobFromPath resolves {job}: a numeric id or a job name.
func (g *Gateway) jobFromPath(r *http.Request) (cron.Job, error) {
	ref := chi.URLParam(r, "job")
	if id, err := strconv.ParseInt(ref, 10, 64); err == nil {
		return g.sched.GetJob(r.Context(), id)
	}
	return g.sched.GetJobByName(r.Context(), ref)
}

func (g *Gateway) createJob(w http.ResponseWriter, r *http.Request) {
	var req jobRequest
	if err := decodeStrict(r, &req); err != nil {
		g.writeError(w, r, err)
		return
	}
	j, err := g.sched.CreateJob(r.Context(), req.def())
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/jobs/"+strconv.FormatInt(j.ID, 10))
	writeJSON(w, http.StatusCreated, g.jobViewOf(j))
}

func (g *Gateway) listJobs(w http.ResponseWriter, r *http.Request) {
	js, err := g.sched.ListJobs(r.Context())
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	out := struct {
		Jobs []jobView `json:"jobs"`
	}{Jobs: []jobView{}}
	for _, j := range js {
		out.Jobs = append(out.Jobs, g.jobViewOf(j))
	}
	writeJSON(w, http.StatusOK, out)
}

func (g *Gateway) getJob(w http.ResponseWriter, r *http.Request) {
	j, err := g.jobFromPath(r)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, g.jobViewOf(j))
}

func (g *Gateway) patchJob(w http.ResponseWriter, r *http.Request) {
	j, err := g.jobFromPath(r)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	var req jobRequest
	if err := decodeStrict(r, &req); err != nil {
		g.writeError(w, r, err)
		return
	}
	j, err = g.sched.UpdateJob(r.Context(), j.ID, req.def())
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, g.jobViewOf(j))
}

func (g *Gateway) deleteJob(w http.ResponseWriter, r *http.Request) {
	j, err := g.jobFromPath(r)
	if err == nil {
		err = g.sched.DeleteJob(r.Context(), j.ID)
	}
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (g *Gateway) runJob(w http.ResponseWriter, r *http.Request) {
	j, err := g.jobFromPath(r)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	e, err := g.sched.RunNow(r.Context(), j.ID)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, executionViewOf(e))
}

func (g *Gateway) listExecutions(w http.ResponseWriter, r *http.Request) {
	// A numeric id reaches a deleted job's history too.
	var j cron.Job
	var err error
	if id, perr := strconv.ParseInt(chi.URLParam(r, "job"), 10, 64); perr == nil {
		j.ID = id
	} else if j, err = g.jobFromPath(r); err != nil {
		g.writeError(w, r, err)
		return
	}
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 1000 {
			g.writeError(w, r, badRequest("invalid_query", "limit %q: want 1..1000", v))
			return
		}
	}
	es, err := g.sched.ListExecutions(r.Context(), j.ID, limit)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	out := struct {
		Executions []executionView `json:"executions"`
	}{Executions: []executionView{}}
	for _, e := range es {
		out.Executions = append(out.Executions, executionViewOf(e))
	}
	writeJSON(w, http.StatusOK, out)
}

// previewJob lists the job's next occurrences from now (count, default 10,
// at most 1000), under the DST policy the scheduler fires by.
func (g *Gateway) previewJob(w http.ResponseWriter, r *http.Request) {
	j, err := g.jobFromPath(r)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	count := 10
	if v := r.URL.Query().Get("count"); v != "" {
		if count, err = strconv.Atoi(v); err != nil || count < 1 || count > 1000 {
			g.writeError(w, r, badRequest("invalid_query", "count %q: want 1..1000", v))
			return
		}
	}
	sched, err := g.sched.ScheduleOf(j)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	type occ struct {
		At    string `json:"at"`
		Local string `json:"local"`
	}
	out := struct {
		Zone        string `json:"zone"`
		Occurrences []occ  `json:"occurrences"`
	}{Zone: sched.Location().String(), Occurrences: []occ{}}
	t := g.clk.Now()
	for len(out.Occurrences) < count {
		next, ok := sched.Next(t)
		if !ok {
			break
		}
		out.Occurrences = append(out.Occurrences, occ{At: rfc3339(next), Local: next.In(sched.Location()).Format(localFormat)})
		t = next
	}
	writeJSON(w, http.StatusOK, out)
}

// settled answers 200 once everything due at or before ?at= (RFC 3339;
// default now) is done in this process — the scheduler has ticked at or
// after it with no job due and no execution in flight, and no obligation
// is due and undelivered — and 503 with the reasons otherwise. Test suites
// on a virtual clock step the clock and wait on it.
func (g *Gateway) settled(w http.ResponseWriter, r *http.Request) {
	// Without ?at=, the probe answers for the last tick's instant: "now"
	// would move with every poll on a real clock and never be reached.
	at := g.sched.LastTick()
	if v := r.URL.Query().Get("at"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			g.writeError(w, r, badRequest("invalid_query", "at %q is not an RFC 3339 instant", v))
			return
		}
		at = t
	}
	ok, why, err := g.sched.Settled(r.Context(), at)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	due, err := g.ledger.DueBy(r.Context(), at)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	if due > 0 {
		ok = false
		why = append(why, fmt.Sprintf("%d obligation(s) due and not delivered", due))
		g.worker.Notify()
	}
	// A process whose clock just moved ticks now instead of at its next
	// poll; one already past at is left alone (pollers would otherwise
	// drive a tick per probe).
	if g.sched.LastTick().Before(at) {
		g.sched.Notify()
	}
	status := http.StatusOK
	if !ok {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, map[string]any{"settled": ok, "at": rfc3339(at), "reasons": append([]string{}, why...)})
}

// cronErrorStatus maps scheduler errors; called from ErrorStatus.
func cronErrorStatus(err error) (int, string, bool) {
	switch {
	case errors.Is(err, cron.ErrBadSpec):
		return http.StatusBadRequest, "bad_spec", true
	case errors.Is(err, cron.ErrUnknownZone):
		return http.StatusBadRequest, "unknown_zone", true
	case errors.Is(err, cron.ErrBadAction):
		return http.StatusBadRequest, "bad_action", true
	case errors.Is(err, cron.ErrInvalidJob):
		return http.StatusBadRequest, "invalid_job", true
	case errors.Is(err, cron.ErrConflict):
		return http.StatusConflict, "conflict", true
	case errors.Is(err, cron.ErrNotFound):
		return http.StatusNotFound, "not_found", true
	case errors.Is(err, cron.ErrNotRunning):
		return http.StatusServiceUnavailable, "not_ready", true
	}
	return 0, "", false
}

// localFormat writes an instant in a job's zone with its offset always as a
// number (London in winter is +00:00 local time, not "Z" — UTC).
const localFormat = "2006-01-02T15:04:05.999999999-07:00"
