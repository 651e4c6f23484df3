package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

var (
	// ErrNotFound matches (errors.Is) an APIError with HTTP 404.
	ErrNotFound = errors.New("not found")
	// ErrUnauthorized matches an APIError with HTTP 401 (token refused).
	ErrUnauthorized = errors.New("token refused")
)

// APIError is a non-2xx answer of the portal. The body is {error, errors?, code?}.
type APIError struct {
	Method     string
	Path       string
	StatusCode int
	Message    string   // the portal's `error` (or the start of a non-JSON body)
	Details    []string // the portal's `errors`
	Code       int      // the portal's `code`; 0 when absent or null
}

func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.StatusCode)
	}
	if len(e.Details) > 0 {
		msg += " (" + strings.Join(e.Details, "; ") + ")"
	}
	switch e.StatusCode {
	case http.StatusUnauthorized:
		return fmt.Sprintf("cloudlab portal refused the API token: %s %s: HTTP 401: %s "+
			"(check the provider `token` or the CLOUDLAB_TOKEN environment variable)", e.Method, e.Path, msg)
	case http.StatusForbidden:
		return fmt.Sprintf("cloudlab portal: %s %s: HTTP 403 (token refused or not allowed here): %s",
			e.Method, e.Path, msg)
	}
	return fmt.Sprintf("cloudlab portal: %s %s: HTTP %d: %s", e.Method, e.Path, e.StatusCode, msg)
}

// Is makes errors.Is(err, ErrNotFound) and errors.Is(err, ErrUnauthorized) work.
func (e *APIError) Is(target error) bool {
	return (target == ErrNotFound && e.StatusCode == http.StatusNotFound) ||
		(target == ErrUnauthorized && e.StatusCode == http.StatusUnauthorized)
}

// IsNotFound reports whether err is a portal 404.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

func (c *Client) apiError(method, path string, status int, body []byte) *APIError {
	e := &APIError{Method: method, Path: path, StatusCode: status}
	var eb struct {
		Error  string   `json:"error"`
		Errors []string `json:"errors"`
		Code   *int     `json:"code"`
	}
	if err := json.Unmarshal(body, &eb); err == nil {
		e.Message = eb.Error
		e.Details = eb.Errors
		if eb.Code != nil {
			e.Code = *eb.Code
		}
	} else {
		text := strings.TrimSpace(string(body))
		if len(text) > 200 {
			text = text[:200] + "..."
		}
		e.Message = text
	}
	e.Message = c.redact(e.Message)
	for i := range e.Details {
		e.Details[i] = c.redact(e.Details[i])
	}
	return e
}

// FailedError is returned when an experiment (or node) reaches the `failed` status.
type FailedError struct {
	What   string // e.g. "experiment myproj,exp1"
	Status string
	URL    string
}

func (e *FailedError) Error() string {
	s := fmt.Sprintf("%s reached status %q", e.What, e.Status)
	if e.URL != "" {
		s += "; the portal gives no reason in the API, see " + e.URL
	}
	return s
}

// TimeoutError is returned when waiting for a status ran out of time.
type TimeoutError struct {
	What       string
	Want       string
	LastStatus string
}

func (e *TimeoutError) Error() string {
	last := e.LastStatus
	if last == "" {
		last = "(none seen)"
	}
	return fmt.Sprintf("timed out waiting for %s to become %s; last status: %s", e.What, e.Want, last)
}
