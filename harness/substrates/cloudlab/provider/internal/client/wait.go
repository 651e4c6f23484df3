package client

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"
)

// Experiment status values the provider knows. The API has no enum: `ready` is
// success, `failed` is terminal, anything else (created, provisioning, ...) is pending.
const (
	StatusReady  = "ready"
	StatusFailed = "failed"
)

// WaitExperimentReady polls GET /experiments/{id} every `every` until `ready`.
// `failed` gives a *FailedError (with the portal URL); the context deadline gives a
// *TimeoutError with the last status. A few 404s right after creation are tolerated.
func (c *Client) WaitExperimentReady(ctx context.Context, id string, every time.Duration) (*Experiment, error) {
	var last *Experiment
	misses := 0
	for {
		exp, err := c.GetExperiment(ctx, id)
		switch {
		case err == nil:
			last, misses = exp, 0
			switch strings.ToLower(exp.Status) {
			case StatusReady:
				return exp, nil
			case StatusFailed:
				return exp, &FailedError{What: "experiment " + id, Status: exp.Status, URL: exp.URL}
			}
			tflog.Debug(ctx, "cloudlab: experiment pending", map[string]any{"id": id, "status": exp.Status})
		case ctx.Err() != nil:
			return last, timeoutErr("experiment "+id, StatusReady, last)
		case IsNotFound(err) && misses < 3:
			misses++
		default:
			return last, err
		}
		if sleep(ctx, every) != nil {
			return last, timeoutErr("experiment "+id, StatusReady, last)
		}
	}
}

// WaitExperimentGone polls GET /experiments/{id} until it answers 404.
func (c *Client) WaitExperimentGone(ctx context.Context, id string, every time.Duration) error {
	var last *Experiment
	for {
		exp, err := c.GetExperiment(ctx, id)
		switch {
		case IsNotFound(err):
			return nil
		case err == nil:
			last = exp
			tflog.Debug(ctx, "cloudlab: experiment still there", map[string]any{"id": id, "status": exp.Status})
		case ctx.Err() != nil:
			return timeoutErr("experiment "+id, "gone (HTTP 404)", last)
		default:
			return err
		}
		if sleep(ctx, every) != nil {
			return timeoutErr("experiment "+id, "gone (HTTP 404)", last)
		}
	}
}

func timeoutErr(what, want string, last *Experiment) error {
	e := &TimeoutError{What: what, Want: want}
	if last != nil {
		e.LastStatus = last.Status
		if last.URL != "" {
			e.LastStatus += " (" + last.URL + ")"
		}
	}
	return e
}

// NodeSettled tells whether a node is done with `action`, and whether it failed.
// Success is status `ready`; after `stop` a status of `stopped` or a state of
// SHUTDOWN/POWEROFF/stopped counts too (the API documents no node status values).
func NodeSettled(action string, n *AggregateNode) (done bool, failed bool) {
	st := strings.ToLower(n.Status)
	if st == StatusFailed {
		return true, true
	}
	if st == StatusReady {
		return true, false
	}
	if action == "stop" {
		state := strings.ToLower(n.State)
		return st == "stopped" || state == "shutdown" || state == "poweroff" || state == "stopped", false
	}
	return false, false
}

// WaitNodeSettled polls GET .../node/{client_id} after an action until NodeSettled.
// When the action's own answer still looked settled, a settled status must be seen on
// two consecutive polls, so a reboot that has not started yet is not taken as done.
func (c *Client) WaitNodeSettled(ctx context.Context, expID, clientID, action string, first *AggregateNode, every time.Duration) (*AggregateNode, error) {
	what := "node " + clientID + " of experiment " + expID + " after " + action
	last := first
	transition := first == nil
	if first != nil {
		done, _ := NodeSettled(action, first)
		transition = !done
	}
	streak := 0
	for {
		if sleep(ctx, every) != nil {
			return last, nodeTimeout(what, last)
		}
		n, err := c.GetNode(ctx, expID, clientID)
		if err != nil {
			if ctx.Err() != nil {
				return last, nodeTimeout(what, last)
			}
			return last, err
		}
		last = n
		done, failed := NodeSettled(action, n)
		if failed {
			return n, &FailedError{What: what, Status: n.Status}
		}
		if !done {
			transition, streak = true, 0
			continue
		}
		streak++
		if transition || streak >= 2 {
			return n, nil
		}
	}
}

func nodeTimeout(what string, last *AggregateNode) error {
	e := &TimeoutError{What: what, Want: "settled (status ready)"}
	if last != nil {
		e.LastStatus = last.Status + "/" + last.State
	}
	return e
}

// IsTimeout reports whether err is a *TimeoutError.
func IsTimeout(err error) bool {
	var t *TimeoutError
	return errors.As(err, &t)
}
