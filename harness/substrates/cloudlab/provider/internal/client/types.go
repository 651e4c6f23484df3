package client

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
)

// ExperimentCreate is the body of POST /experiments.
type ExperimentCreate struct {
	Name           string            `json:"name"`
	Project        string            `json:"project"`
	Group          string            `json:"group,omitempty"`
	ProfileName    string            `json:"profile_name"`
	ProfileProject string            `json:"profile_project"`
	Duration       int64             `json:"duration,omitempty"`
	Bindings       map[string]string `json:"bindings,omitempty"`
	SSHPubKey      string            `json:"sshpubkey,omitempty"`
}

// ExtensionRequest is the body of PUT /experiments/{id}.
type ExtensionRequest struct {
	ExtendBy int64  `json:"extend_by,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// Experiment is the portal's Experiment; only id is guaranteed.
type Experiment struct {
	ID             string          `json:"id"`
	Name           string          `json:"name"`
	Project        string          `json:"project"`
	Group          string          `json:"group"`
	ProfileID      string          `json:"profile_id"`
	ProfileName    string          `json:"profile_name"`
	ProfileProject string          `json:"profile_project"`
	Creator        string          `json:"creator"`
	Status         string          `json:"status"`
	CreatedAt      string          `json:"created_at"`
	StartedAt      string          `json:"started_at"`
	ExpiresAt      string          `json:"expires_at"`
	URL            string          `json:"url"`
	Bindings       json.RawMessage `json:"bindings"`
	SSHPubKey      string          `json:"sshpubkey"`
	// Aggregates is documented as a map of AggregateStatus whose key meaning is
	// undefined (URN or nickname); a list is accepted too. See AggregateList.
	Aggregates json.RawMessage `json:"aggregates"`
}

// AggregateStatus is one cluster of an experiment.
type AggregateStatus struct {
	URN    string          `json:"urn"`
	Name   string          `json:"name"`
	Status string          `json:"status"`
	Nodes  []AggregateNode `json:"nodes"`
}

// AggregateNode is one node; every field is a string.
type AggregateNode struct {
	URN           string `json:"urn"`
	ClientID      string `json:"client_id"`
	Hostname      string `json:"hostname"`
	IPv4          string `json:"ipv4"`
	Status        string `json:"status"`
	State         string `json:"state"`
	RawState      string `json:"rawstate"`
	StartupStatus string `json:"startup_status"`
}

// AggregateList decodes `aggregates` (map or list), sorted by key for a stable order.
func (e *Experiment) AggregateList() []AggregateStatus {
	if len(e.Aggregates) == 0 {
		return nil
	}
	var m map[string]AggregateStatus
	if err := json.Unmarshal(e.Aggregates, &m); err == nil {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := make([]AggregateStatus, 0, len(m))
		for _, k := range keys {
			a := m[k]
			if a.URN == "" && strings.HasPrefix(k, "urn:") {
				a.URN = k
			}
			out = append(out, a)
		}
		return out
	}
	var l []AggregateStatus
	if err := json.Unmarshal(e.Aggregates, &l); err == nil {
		return l
	}
	return nil
}

// BindingStrings decodes `bindings` (object, or an object encoded as a JSON string)
// into strings: string values as they are, other values as their JSON text (3 -> "3").
func (e *Experiment) BindingStrings() map[string]string {
	raw := e.Bindings
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = json.RawMessage(s)
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		var str string
		if json.Unmarshal(v, &str) == nil {
			out[k] = str
		} else {
			out[k] = string(v)
		}
	}
	return out
}

// ProfileCreate is the body of POST /profiles.
type ProfileCreate struct {
	Name            string `json:"name"`
	Project         string `json:"project"`
	Script          string `json:"script"`
	Public          bool   `json:"public"`
	ProjectWritable bool   `json:"project_writable"`
}

// ProfileUpdate is the body of PATCH /profiles/{id}; nil fields are left alone.
type ProfileUpdate struct {
	Script          *string `json:"script,omitempty"`
	Public          *bool   `json:"public,omitempty"`
	ProjectWritable *bool   `json:"project_writable,omitempty"`
}

// Profile is the portal's Profile.
type Profile struct {
	ID              string                    `json:"id"`
	Name            string                    `json:"name"`
	Version         FlexInt                   `json:"version"`
	Project         string                    `json:"project"`
	Creator         string                    `json:"creator"`
	Public          bool                      `json:"public"`
	ProjectWritable bool                      `json:"project_writable"`
	CurrentVersion  json.RawMessage           `json:"current_version"`
	Versions        map[string]ProfileVersion `json:"profile_versions"`
}

// ProfileVersion is one stored version of a profile.
type ProfileVersion struct {
	ID      string  `json:"id"`
	Version FlexInt `json:"version"`
	Script  string  `json:"script"`
	RSpec   string  `json:"rspec"`
}

// CurrentScript returns the script of the profile's current version, if the portal shows it.
func (p *Profile) CurrentScript() string {
	for _, v := range p.Versions {
		if v.Version == p.Version && v.Script != "" {
			return v.Script
		}
	}
	return ""
}

// FlexInt decodes a JSON number or a numeric string.
type FlexInt int64

// UnmarshalJSON accepts 3, "3" and null.
func (f *FlexInt) UnmarshalJSON(b []byte) error {
	s := strings.Trim(strings.TrimSpace(string(b)), `"`)
	if s == "" || s == "null" {
		*f = 0
		return nil
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return err
	}
	*f = FlexInt(n)
	return nil
}
