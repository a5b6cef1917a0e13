package gateway

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"herald/internal/store"
	"herald/outbox"
)

// apiError is the body of every error answer: {"error":{"code","message"}}.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// httpError is an error with its HTTP status and machine-readable code.
type httpError struct {
	status int
	code   string
	err    error
}

func (e *httpError) Error() string { return e.err.Error() }
func (e *httpError) Unwrap() error { return e.err }

func badRequest(code, format string, args ...any) error {
	return &httpError{status: http.StatusBadRequest, code: code, err: fmt.Errorf(format, args...)}
}

// ErrorStatus maps an error to its HTTP status and code — the one place
// where that mapping lives.
func ErrorStatus(err error) (int, string) {
	var he *httpError
	if status, code, ok := cronErrorStatus(err); ok {
		return status, code
	}
	switch {
	case errors.As(err, &he):
		return he.status, he.code
	case errors.Is(err, outbox.ErrInvalid):
		return http.StatusBadRequest, "invalid_message"
	case errors.Is(err, outbox.ErrConflict):
		return http.StatusConflict, "idempotency_conflict"
	case errors.Is(err, outbox.ErrNotFound):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, store.ErrBusy):
		return http.StatusServiceUnavailable, "store_busy"
	case errors.Is(err, store.ErrFull):
		return http.StatusInsufficientStorage, "storage_full"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, "unavailable"
	}
	return http.StatusInternalServerError, "internal"
}

func (g *Gateway) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, code := ErrorStatus(err)
	var body apiError
	body.Error.Code = code
	body.Error.Message = err.Error()
	if status >= 500 {
		g.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
		if status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// Handler returns the HTTP API of SPEC §7.
func (g *Gateway) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	r.Use(g.limitBody)
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", g.readyz)
	r.Route("/v1", func(r chi.Router) {
		r.Use(g.auth)
		r.Post("/messages", g.postMessage)
		r.Get("/messages", g.listMessages)
		r.Get("/messages/{id}", g.getMessage)
		g.jobRoutes(r)
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		g.writeError(w, r, &httpError{http.StatusNotFound, "not_found", fmt.Errorf("no route %s %s", r.Method, r.URL.Path)})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		g.writeError(w, r, &httpError{http.StatusMethodNotAllowed, "method_not_allowed", fmt.Errorf("%s not allowed on %s", r.Method, r.URL.Path)})
	})
	return r
}

func (g *Gateway) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > g.cfg.MaxBodyBytes {
			g.writeError(w, r, &httpError{http.StatusRequestEntityTooLarge, "body_too_large",
				fmt.Errorf("request body of %d bytes exceeds the limit of %d bytes", r.ContentLength, g.cfg.MaxBodyBytes)})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, g.cfg.MaxBodyBytes)
		next.ServeHTTP(w, r)
	})
}

func (g *Gateway) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.cfg.Token != "" {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(g.cfg.Token)) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="herald"`)
				g.writeError(w, r, &httpError{http.StatusUnauthorized, "unauthorized", errors.New("missing or wrong bearer token")})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (g *Gateway) readyz(w http.ResponseWriter, r *http.Request) {
	if !g.ready.Load() {
		g.writeError(w, r, &httpError{http.StatusServiceUnavailable, "not_ready", errors.New("booting or draining")})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	var one int
	if err := g.db.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		g.writeError(w, r, &httpError{http.StatusServiceUnavailable, "store_unavailable", err})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// messageRequest is the body of POST /v1/messages.
type messageRequest struct {
	Platform       string `json:"platform"`
	ChatID         string `json:"chat_id"`
	Text           string `json:"text"`
	IdempotencyKey string `json:"idempotency_key"`
}

// partView is one obligation in a message view.
type partView struct {
	Part              int     `json:"part"`
	State             string  `json:"state"`
	Attempts          int     `json:"attempts"`
	PlatformMessageID *string `json:"platform_message_id"`
	ErrorClass        *string `json:"error_class"`
	Error             *string `json:"error"`
	UpdatedAt         string  `json:"updated_at"`
}

// messageView is the JSON shape of a message (SPEC §7).
type messageView struct {
	ID                int64      `json:"id"`
	Platform          string     `json:"platform"`
	ChatID            string     `json:"chat_id"`
	State             string     `json:"state"`
	Attempts          int        `json:"attempts"`
	PlatformMessageID *string    `json:"platform_message_id"`
	Error             *string    `json:"error"`
	CreatedAt         string     `json:"created_at"`
	UpdatedAt         string     `json:"updated_at"`
	IdempotencyKey    string     `json:"idempotency_key"`
	Parts             []partView `json:"parts"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func viewOf(m outbox.Message) messageView {
	v := messageView{
		ID: m.ID, Platform: m.Platform, ChatID: m.ChatID, State: string(m.State), Attempts: m.Attempts,
		PlatformMessageID: nullable(m.PlatformMessageID), Error: nullable(m.Error),
		CreatedAt: rfc3339(m.CreatedAt), UpdatedAt: rfc3339(m.UpdatedAt), IdempotencyKey: m.IdempotencyKey,
		Parts: []partView{},
	}
	for _, p := range m.Parts {
		v.Parts = append(v.Parts, partView{
			Part: p.Part, State: string(p.State), Attempts: p.Attempts,
			PlatformMessageID: nullable(p.PlatformMessageID), ErrorClass: nullable(string(p.ErrorClass)),
			Error: nullable(p.Error), UpdatedAt: rfc3339(p.UpdatedAt),
		})
	}
	return v
}

func (g *Gateway) postMessage(w http.ResponseWriter, r *http.Request) {
	var req messageRequest
	if err := decodeStrict(r, &req); err != nil {
		g.writeError(w, r, err)
		return
	}
	if k := r.Header.Get("Idempotency-Key"); k != "" {
		if req.IdempotencyKey != "" && req.IdempotencyKey != k {
			g.writeError(w, r, badRequest("invalid_message", "Idempotency-Key header and idempotency_key field differ"))
			return
		}
		req.IdempotencyKey = k
	}
	if req.Platform == "" {
		g.writeError(w, r, badRequest("invalid_message", "platform is required (configured: %s)", strings.Join(g.platforms.Names(), ", ")))
		return
	}
	sender, ok := g.platforms.Lookup(req.Platform)
	if !ok {
		g.writeError(w, r, badRequest("unknown_platform", "unknown platform %q (configured: %s)", req.Platform, strings.Join(g.platforms.Names(), ", ")))
		return
	}
	if len(req.Text) > g.cfg.MaxTextBytes {
		g.writeError(w, r, &httpError{http.StatusRequestEntityTooLarge, "text_too_long",
			fmt.Errorf("text of %d bytes exceeds the limit of %d bytes", len(req.Text), g.cfg.MaxTextBytes)})
		return
	}
	m, created, err := g.ledger.Record(r.Context(), outbox.NewMessage{
		Platform: req.Platform, ChatID: req.ChatID, Text: req.Text, IdempotencyKey: req.IdempotencyKey,
	}, sender.Limit())
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusAccepted
		g.worker.Notify()
	}
	w.Header().Set("Location", "/v1/messages/"+strconv.FormatInt(m.ID, 10))
	writeJSON(w, status, viewOf(m))
}

func (g *Gateway) getMessage(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id <= 0 {
		g.writeError(w, r, badRequest("invalid_id", "message id %q is not a positive integer", chi.URLParam(r, "id")))
		return
	}
	m, err := g.ledger.Get(r.Context(), id)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, viewOf(m))
}

func (g *Gateway) listMessages(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := outbox.Filter{Platform: q.Get("platform"), ChatID: q.Get("chat_id")}
	switch q.Get("state") {
	case "", "all":
	case "open":
		f.Open = true
	default:
		g.writeError(w, r, badRequest("invalid_query", "state %q: want open or all", q.Get("state")))
		return
	}
	for name, dst := range map[string]*int64{"before": &f.BeforeID} {
		if v := q.Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				g.writeError(w, r, badRequest("invalid_query", "%s %q is not a positive integer", name, v))
				return
			}
			*dst = n
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > 1000 {
			g.writeError(w, r, badRequest("invalid_query", "limit %q: want 1..1000", v))
			return
		}
		f.Limit = n
	}
	ms, err := g.ledger.List(r.Context(), f)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	out := struct {
		Messages []messageView `json:"messages"`
	}{Messages: []messageView{}}
	for _, m := range ms {
		out.Messages = append(out.Messages, viewOf(m))
	}
	writeJSON(w, http.StatusOK, out)
}

// requestLog logs one line per request at debug level.
func requestLog(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r)
		log.Debug("http", "method", r.Method, "path", r.URL.Path, "status", ww.Status())
	})
}
