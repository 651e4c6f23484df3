package fakeportal

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

func (p *Portal) findProfile(id string) *profile {
	if pr, ok := p.profiles[id]; ok {
		return pr
	}
	if proj, name, ok := strings.Cut(id, ","); ok {
		for _, pr := range p.profiles {
			if pr.data["project"] == proj && pr.data["name"] == name {
				return pr
			}
		}
	}
	return nil
}

func (p *Portal) profilesRoute(w http.ResponseWriter, r *http.Request, rest []string, b map[string]any) {
	if len(rest) == 0 || rest[0] == "" {
		if r.Method != http.MethodPost {
			p.fail(w, r, 405, "method not allowed")
			return
		}
		name, _ := b["name"].(string)
		proj, _ := b["project"].(string)
		script, _ := b["script"].(string)
		if name == "" || proj == "" || script == "" {
			p.fail(w, r, 400, "name, project and script (or repository_url) are required")
			return
		}
		if p.findProfile(proj+","+name) != nil {
			p.fail(w, r, 400, "Profile already exists")
			return
		}
		id := p.uuid()
		pr := &profile{data: map[string]any{"id": id, "name": name, "project": proj, "creator": "alice",
			"created_at": time.Now().UTC().Format(time.RFC3339), "version": 0,
			"public": b["public"] == true, "project_writable": b["project_writable"] == true,
			"profile_versions": map[string]any{}}}
		p.addVersion(pr, script)
		p.profiles[id] = pr
		writeJSON(w, 201, pr.data)
		return
	}
	pr := p.findProfile(rest[0])
	if pr == nil || len(rest) > 1 {
		p.fail(w, r, 404, "No such profile "+rest[0])
		return
	}
	switch r.Method {
	case http.MethodGet:
		writeJSON(w, 200, pr.data)
	case http.MethodPatch:
		if s, ok := b["script"].(string); ok {
			p.addVersion(pr, s)
		}
		for _, k := range []string{"public", "project_writable"} {
			if v, ok := b[k].(bool); ok {
				pr.data[k] = v
			}
		}
		writeJSON(w, 200, pr.data)
	case http.MethodDelete:
		delete(p.profiles, pr.data["id"].(string))
		w.WriteHeader(http.StatusNoContent)
	default:
		p.fail(w, r, 405, "method not allowed")
	}
}

func (p *Portal) addVersion(pr *profile, script string) {
	v := pr.data["version"].(int) + 1
	pr.data["version"] = v
	vid := p.uuid()
	pr.data["current_version"] = v
	pr.data["profile_versions"].(map[string]any)[strconv.Itoa(v)] = map[string]any{
		"id": vid, "version": v, "updater": "alice", "created_at": time.Now().UTC().Format(time.RFC3339),
		"script": script, "rspec": "<rspec type=\"request\"/>", "parameters": map[string]any{},
	}
}
