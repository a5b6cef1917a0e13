// Package fakeplatform is a stand-in chat platform for herald's tests.
//
// It speaks one small HTTP API for three profiles (telegram, discord, slack)
// that differ in their length limit and in whether they honour an
// idempotency key, plus a Standard Webhooks receiver (POST /webhook/{receiver})
// that verifies signatures and deduplicates on webhook-id, and it journals
// every operation a user would see — each send, edit and delete — as one
// fsynced JSON line before it answers. Tests
// program faults (lost acks, timeouts, rate limits, resets, holds) over an
// HTTP control API or the Server's methods, then compare what herald
// believes with what the journal holds. README.md documents the wire API.
package fakeplatform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"herald/internal/clock"
)

// DefaultDedupWindow is how long a profile that honours idempotency keys
// remembers a key (Discord's "past few minutes").
const DefaultDedupWindow = 10 * time.Minute

// maxBodyBytes bounds a request body.
const maxBodyBytes = 1 << 20

// Descriptions of the platform errors, in Telegram's wording.
const (
	descEmpty         = "Bad Request: message text is empty"
	descTooLong       = "Bad Request: message is too long"
	descNotModified   = "Bad Request: message is not modified"
	descEditNotFound  = "Not Found: message to edit not found"
	descDeleteMissing = "Not Found: message to delete not found"
	descServerError   = "Internal Server Error"
	descClosed        = "Service Unavailable: server is shutting down"
)

// Config configures a Server.
type Config struct {
	// JournalPath is the journal file; it is created if missing and
	// replayed if present. Required.
	JournalPath string
	// Clock stamps journal entries and measures the dedup window.
	// Default clock.Real{}. Hold durations always run on real time.
	Clock clock.Clock
	// DedupWindow is how long a repeated idempotency key is answered with
	// the existing message on profiles that honour keys. Default
	// DefaultDedupWindow.
	DedupWindow time.Duration
	// Logger receives faults fired and journal trouble. Default: discard.
	Logger *slog.Logger
	// WebhookSecret is the Standard Webhooks secret the webhook receiver
	// (POST /webhook/{receiver}) verifies signatures with: "whsec_" and the
	// base64 of the key, or, without that prefix, the key's raw bytes (as
	// herald's webhook: platform takes it). Empty: the receiver refuses
	// every delivery with 401.
	WebhookSecret string
	// WebhookTolerance is how far a delivery's webhook-timestamp may lie
	// from the fake's clock, before or after it. Default
	// DefaultWebhookTolerance.
	WebhookTolerance time.Duration
}

// Server is the fake platform. It is safe for concurrent use.
type Server struct {
	clock  clock.Clock
	window time.Duration
	log    *slog.Logger
	router chi.Router
	hook   webhookVerifier

	mu          sync.Mutex
	j           *journal
	st          state
	faults      []*ArmedFault
	nextFaultID int64
	stats       Stats
	held        map[int64]chan struct{} // parked requests by id; closed on release
	nextHeldID  int64
	heldChanged chan struct{} // closed and replaced whenever len(held) changes
	closed      bool
	closing     chan struct{}
	inflight    sync.WaitGroup
}

// New opens (or creates) the journal, replays it and returns a Server ready
// to serve. A torn last journal line, left by a crash mid-write, is cut off.
func New(cfg Config) (*Server, error) {
	if cfg.JournalPath == "" {
		return nil, errors.New("new fakeplatform: journal path is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.DedupWindow == 0 {
		cfg.DedupWindow = DefaultDedupWindow
	}
	if cfg.DedupWindow < 0 {
		return nil, fmt.Errorf("new fakeplatform: negative dedup window %v", cfg.DedupWindow)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	hook, err := newWebhookVerifier(cfg.WebhookSecret, cfg.WebhookTolerance)
	if err != nil {
		return nil, fmt.Errorf("new fakeplatform: %w", err)
	}
	j, entries, torn, err := openJournal(cfg.JournalPath)
	if err != nil {
		return nil, fmt.Errorf("new fakeplatform: %w", err)
	}
	s := &Server{
		clock:       cfg.Clock,
		window:      cfg.DedupWindow,
		log:         cfg.Logger,
		hook:        hook,
		j:           j,
		st:          newState(),
		held:        map[int64]chan struct{}{},
		heldChanged: make(chan struct{}),
		closing:     make(chan struct{}),
		stats:       newStats(),
	}
	for _, e := range entries {
		if err := s.st.apply(e); err != nil {
			j.close()
			return nil, fmt.Errorf("new fakeplatform: replay journal %s: %w", cfg.JournalPath, err)
		}
	}
	s.stats.JournalSeq = s.st.seq
	if torn > 0 {
		s.log.Warn("truncated torn last journal line", "journal", cfg.JournalPath, "bytes", torn)
	}
	s.log.Info("journal replayed", "journal", cfg.JournalPath, "entries", len(entries), "seq", s.st.seq)
	s.router = s.routes()
	return s, nil
}

// Handler returns the HTTP handler serving the platform API, the control
// API and /healthz.
func (s *Server) Handler() http.Handler { return s.router }

// Close releases every held request, waits for the requests in flight to
// finish and closes the journal. Requests arriving after Close get 503.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.closing)
	s.mu.Unlock()
	s.inflight.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.j.close()
}

func (s *Server) routes() chi.Router {
	r := chi.NewRouter()
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "Not Found: no such endpoint")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, "Method Not Allowed")
	})
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	})
	r.Route("/control", func(r chi.Router) {
		r.Post("/faults", s.handleAddFault)
		r.Get("/faults", s.handleListFaults)
		r.Delete("/faults", s.handleClearFaults)
		r.Post("/release", s.handleRelease)
		r.Get("/stats", s.handleStats)
	})
	r.Post("/webhook/{receiver}", s.handleWebhook)
	r.Post("/{profile}/chats/{chat_id}/messages", s.handleSend)
	r.Get("/{profile}/chats/{chat_id}/messages", s.handleList)
	r.Patch("/{profile}/chats/{chat_id}/messages/{message_id}", s.handleEdit)
	r.Delete("/{profile}/chats/{chat_id}/messages/{message_id}", s.handleDelete)
	return r
}

// opRequest is one platform operation as decoded from its request.
type opRequest struct {
	op         Op
	profile    Profile
	chatID     string
	messageID  string // edit, delete
	text       string // send, edit
	key        string // send
	redelivery bool   // send
	receiver   string // webhook sends: the receiver of the path
}

// sendRequest is the body of POST /{profile}/chats/{chat_id}/messages.
type sendRequest struct {
	Text           string `json:"text"`
	IdempotencyKey string `json:"idempotency_key"`
	Redelivery     bool   `json:"redelivery"`
}

// editRequest is the body of PATCH …/messages/{message_id}.
type editRequest struct {
	Text string `json:"text"`
}

func (s *Server) handleSend(w http.ResponseWriter, r *http.Request) {
	req, ok := s.decodeOp(w, r, OpSend)
	if !ok {
		return
	}
	var body sendRequest
	if !decodeBody(w, r, &body) {
		return
	}
	req.text, req.key, req.redelivery = body.Text, body.IdempotencyKey, body.Redelivery
	s.serveOp(w, r, req)
}

func (s *Server) handleEdit(w http.ResponseWriter, r *http.Request) {
	req, ok := s.decodeOp(w, r, OpEdit)
	if !ok {
		return
	}
	var body editRequest
	if !decodeBody(w, r, &body) {
		return
	}
	req.text = body.Text
	s.serveOp(w, r, req)
}

func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	req, ok := s.decodeOp(w, r, OpDelete)
	if !ok {
		return
	}
	s.serveOp(w, r, req)
}

// listResponse is the answer of GET /{profile}/chats/{chat_id}/messages.
type listResponse struct {
	OK       bool      `json:"ok"`
	Messages []Message `json:"messages"`
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	req, ok := s.decodeOp(w, r, "")
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, listResponse{OK: true, Messages: s.Messages(req.profile.Name, req.chatID)})
}

// decodeOp reads the profile, chat and message id from the path.
func (s *Server) decodeOp(w http.ResponseWriter, r *http.Request, op Op) (opRequest, bool) {
	name := pathParam(r, "profile")
	p, ok := LookupProfile(name)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("Not Found: unknown profile %q", name))
		return opRequest{}, false
	}
	return opRequest{op: op, profile: p, chatID: pathParam(r, "chat_id"), messageID: pathParam(r, "message_id")}, true
}

// pathParam returns a decoded path parameter (chi hands out the escaped
// form when the path needed escaping, e.g. a chat id holding a slash).
func pathParam(r *http.Request, name string) string {
	v := chi.URLParam(r, name)
	if r.URL.RawPath != "" {
		if u, err := url.PathUnescape(v); err == nil {
			return u
		}
	}
	return v
}

// decodeBody decodes a JSON body into v and reads the body to its end, so
// the server notices at once when the client goes away (r.Context()).
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	body := http.MaxBytesReader(w, r.Body, maxBodyBytes)
	err := json.NewDecoder(body).Decode(v)
	if err == nil {
		_, err = io.Copy(io.Discard, body)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "Bad Request: can't parse request body: "+err.Error())
		return false
	}
	return true
}

// serveOp runs one platform operation through the armed faults.
func (s *Server) serveOp(w http.ResponseWriter, r *http.Request, req opRequest) {
	s.serveFaulted(w, r, req, func() (int, any) { return s.perform(req) })
}

// serveFaulted runs the armed faults matching req around perform, which
// validates, journals and applies the operation and returns the answer.
func (s *Server) serveFaulted(w http.ResponseWriter, r *http.Request, req opRequest, perform func() (int, any)) {
	if !s.enter() {
		writeError(w, http.StatusServiceUnavailable, descClosed)
		return
	}
	defer s.inflight.Done()

	f, faulted := s.takeFault(req)
	if faulted {
		switch f.Kind {
		case FaultTimeoutBeforeAccept:
			s.park(r.Context().Done(), 0)
			abortConn(w)
			return
		case FaultRateLimit:
			writeRateLimited(w, f.RetryAfter)
			return
		case FaultServerError:
			writeError(w, http.StatusInternalServerError, descServerError)
			return
		case FaultReset:
			abortConn(w)
			return
		case FaultOverLength:
			writeError(w, http.StatusBadRequest, descTooLong)
			return
		case FaultHoldBeforeAccept:
			s.park(nil, f.Hold) // the client giving up does not stop it
		}
	}
	status, body := perform()
	if faulted {
		switch f.Kind {
		case FaultAckLost:
			abortConn(w)
			return
		case FaultHoldAfterAccept:
			s.park(nil, f.Hold)
		}
	}
	writeJSON(w, status, body)
}

// enter registers a request in flight, unless the server is closed.
func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.inflight.Add(1)
	return true
}

// okResponse is the answer to an accepted (or deduplicated) operation.
type okResponse struct {
	OK        bool   `json:"ok"`
	MessageID string `json:"message_id"`
	// Deduplicated is set when a repeated idempotency key returned the
	// existing message and nothing new was journalled.
	Deduplicated bool `json:"deduplicated,omitempty"`
}

// perform validates the operation and, if valid, journals (write + fsync)
// and applies it, all under the lock: journal order is acceptance order.
func (s *Server) perform(req opRequest) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now().UTC()
	e := Entry{Seq: s.st.seq + 1, Op: req.op, ChatID: req.chatID, At: now, Profile: req.profile.Name}
	switch req.op {
	case OpSend:
		if req.text == "" {
			return errorBody(http.StatusBadRequest, descEmpty)
		}
		if UTF16Len(req.text) > req.profile.MaxTextUnits {
			return errorBody(http.StatusBadRequest, descTooLong)
		}
		if req.profile.HonoursIdempotencyKey && req.key != "" {
			if d, ok := s.st.dedup[dedupKey{req.profile.Name, req.chatID, req.key}]; ok && now.Sub(d.at) < s.window {
				s.stats.Deduplicated++
				return http.StatusOK, okResponse{OK: true, MessageID: d.messageID, Deduplicated: true}
			}
		}
		e.MessageID = strconv.FormatInt(e.Seq, 10)
		e.Text, e.IdempotencyKey, e.Redelivery = req.text, req.key, req.redelivery
	case OpEdit:
		m := s.st.lookup(req.profile.Name, req.chatID, req.messageID)
		switch {
		case m == nil:
			return errorBody(http.StatusNotFound, descEditNotFound)
		case req.text == "":
			return errorBody(http.StatusBadRequest, descEmpty)
		case UTF16Len(req.text) > req.profile.MaxTextUnits:
			return errorBody(http.StatusBadRequest, descTooLong)
		case req.text == m.text:
			return errorBody(http.StatusBadRequest, descNotModified)
		}
		e.MessageID, e.Text = m.id, req.text
	case OpDelete:
		m := s.st.lookup(req.profile.Name, req.chatID, req.messageID)
		if m == nil {
			return errorBody(http.StatusNotFound, descDeleteMissing)
		}
		e.MessageID = m.id
	}
	if err := s.acceptLocked(e); err != nil {
		return errorBody(http.StatusInternalServerError, descServerError+": journal write failed")
	}
	return http.StatusOK, okResponse{OK: true, MessageID: e.MessageID}
}

// acceptLocked journals e (write + fsync) and applies it to the state. It
// is called with s.mu held, after e was validated against the state.
func (s *Server) acceptLocked(e Entry) error {
	if err := s.j.append(e); err != nil {
		s.log.Error("journal append failed; operation not accepted", "op", e.Op, "profile", e.Profile, "err", err)
		return err
	}
	if err := s.st.apply(e); err != nil {
		// Unreachable: e was validated against the same state.
		s.log.Error("apply journalled entry", "seq", e.Seq, "err", err)
	}
	s.stats.Accepted[e.Op]++
	s.stats.JournalSeq = s.st.seq
	s.log.Debug("accepted", "seq", e.Seq, "op", e.Op, "profile", e.Profile, "chat_id", e.ChatID, "message_id", e.MessageID)
	return nil
}

// park blocks the calling request until it is released (Release), its hold
// elapses (hold > 0, real time), clientGone is closed or the server closes.
func (s *Server) park(clientGone <-chan struct{}, hold time.Duration) {
	release := make(chan struct{})
	s.mu.Lock()
	s.nextHeldID++
	id := s.nextHeldID
	s.held[id] = release
	s.heldChangedLocked()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if _, ok := s.held[id]; ok {
			delete(s.held, id)
			s.heldChangedLocked()
		}
		s.mu.Unlock()
	}()
	var expired <-chan time.Time
	if hold > 0 {
		t := clock.Real{}.NewTimer(hold)
		defer t.Stop()
		expired = t.C()
	}
	select {
	case <-release:
	case <-expired:
	case <-clientGone:
	case <-s.closing:
	}
}

func (s *Server) heldChangedLocked() {
	close(s.heldChanged)
	s.heldChanged = make(chan struct{})
}

// WaitHeld blocks until at least n requests are held by a fault (parked
// by timeout_before_accept, hold_before_accept or hold_after_accept), or ctx
// is done. Tests use it to know a request has reached the fake before they
// release it or let the client give up.
func (s *Server) WaitHeld(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		held, changed := len(s.held), s.heldChanged
		s.mu.Unlock()
		if held >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %d held requests (%d held): %w", n, held, ctx.Err())
		case <-changed:
		}
	}
}

// abortConn drops the connection without an answer: hijack, SO_LINGER 0
// (so the close sends a RST) and close.
func abortConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // net/http drops the connection silently
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// errorResponse is every error answer: {"ok":false,"error_code","description"},
// plus "retry_after" on a 429.
type errorResponse struct {
	OK          bool    `json:"ok"`
	ErrorCode   int     `json:"error_code"`
	Description string  `json:"description"`
	RetryAfter  float64 `json:"retry_after,omitempty"`
}

func errorBody(status int, desc string) (int, any) {
	return status, errorResponse{ErrorCode: status, Description: desc}
}

func writeError(w http.ResponseWriter, status int, desc string) {
	code, body := errorBody(status, desc)
	writeJSON(w, code, body)
}

// writeRateLimited answers 429 with Retry-After in whole seconds, rounded
// up, and the exact (possibly fractional) retry_after in the body.
func writeRateLimited(w http.ResponseWriter, retryAfter float64) {
	secs := int64(math.Ceil(retryAfter))
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	writeJSON(w, http.StatusTooManyRequests, errorResponse{
		ErrorCode:   http.StatusTooManyRequests,
		Description: "Too Many Requests: retry after " + strconv.FormatInt(secs, 10),
		RetryAfter:  retryAfter,
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"ok":false,"error_code":500,"description":"Internal Server Error: encode response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
