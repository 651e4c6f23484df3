package fakeportal

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

func (p *Portal) findExp(id string) *experiment {
	if e, ok := p.exps[id]; ok {
		return e
	}
	if proj, name, ok := strings.Cut(id, ","); ok {
		for _, e := range p.exps {
			if e.data["project"] == proj && e.data["name"] == name {
				return e
			}
		}
	}
	return nil
}

func (p *Portal) experiments(w http.ResponseWriter, r *http.Request, rest []string, body map[string]any) {
	if len(rest) == 0 || rest[0] == "" {
		switch r.Method {
		case http.MethodPost:
			p.createExp(w, r, body)
		case http.MethodGet:
			list := []any{}
			for _, e := range p.exps {
				if q := r.URL.Query().Get("project"); q == "" || e.data["project"] == q {
					list = append(list, p.view(e))
				}
			}
			writeJSON(w, 200, map[string]any{"experiments": list})
		default:
			p.fail(w, r, 405, "method not allowed")
		}
		return
	}
	e := p.findExp(rest[0])
	if e == nil {
		p.fail(w, r, 404, "No such experiment "+rest[0])
		return
	}
	switch {
	case len(rest) == 1 && r.Method == http.MethodGet:
		if e.deleting >= 0 {
			if e.deleting == 0 {
				delete(p.exps, e.data["id"].(string))
				p.fail(w, r, 404, "No such experiment")
				return
			}
			e.deleting--
		}
		e.gets++
		writeJSON(w, 200, p.view(e))
	case len(rest) == 1 && r.Method == http.MethodPut:
		hours, ok := body["extend_by"].(float64)
		if !ok || hours <= 0 {
			p.fail(w, r, 400, "extend_by or expires_at required")
			return
		}
		exp, _ := time.Parse(time.RFC3339, e.data["expires_at"].(string))
		e.data["expires_at"] = exp.Add(time.Duration(hours) * time.Hour).Format(time.RFC3339)
		writeJSON(w, 200, p.view(e))
	case len(rest) == 1 && r.Method == http.MethodDelete:
		if e.deleting < 0 {
			e.deleting = p.GoneAfter
		}
		w.WriteHeader(http.StatusNoContent)
	case len(rest) == 2 && rest[1] == "manifests" && r.Method == http.MethodGet:
		writeJSON(w, 200, p.manifests(e))
	case len(rest) >= 3 && rest[1] == "node":
		p.nodeOp(w, r, e, rest[2], rest[3:])
	default:
		p.fail(w, r, 404, "No such path")
	}
}

func (p *Portal) createExp(w http.ResponseWriter, r *http.Request, b map[string]any) {
	var missing []string
	for _, k := range []string{"name", "project", "profile_name", "profile_project"} {
		if s, _ := b[k].(string); s == "" {
			missing = append(missing, k+" is required")
		}
	}
	if len(missing) > 0 {
		writeJSON(w, 400, map[string]any{"error": "Invalid request", "errors": missing, "code": 400})
		return
	}
	if p.findExp(b["project"].(string)+","+b["name"].(string)) != nil {
		p.fail(w, r, 400, "Experiment already exists")
		return
	}
	id := p.uuid()
	hours := 16.0
	if d, ok := b["duration"].(float64); ok {
		hours = d
	}
	now := time.Now().UTC().Truncate(time.Second)
	group, _ := b["group"].(string)
	if group == "" {
		group = b["project"].(string)
	}
	bindings, _ := b["bindings"].(map[string]any)
	e := &experiment{deleting: -1, fail: strings.Contains(b["name"].(string), "fail"), data: map[string]any{
		"id": id, "name": b["name"], "project": b["project"], "group": group,
		"profile_name": b["profile_name"], "profile_project": b["profile_project"],
		"creator": "alice", "status": "created", "created_at": now.Format(time.RFC3339),
		"expires_at": now.Add(time.Duration(hours) * time.Hour).Format(time.RFC3339),
		"url":        "https://portal.example/status.php?uuid=" + id, "bindings": bindings,
		"wbstore_id": "w-" + id[:8], "sshpubkey": b["sshpubkey"],
	}}
	n := 1
	if v, ok := bindings["n"]; ok {
		if k, err := strconv.Atoi(fmt.Sprint(v)); err == nil && k > 0 {
			n = k
		}
	}
	for i := 1; i <= n; i++ {
		e.nodes = append(e.nodes, map[string]any{
			"urn":       fmt.Sprintf("urn:publicid:IDN+emulab.net+sliver+%d", 1000+i),
			"client_id": fmt.Sprintf("node%d", i), "hostname": fmt.Sprintf("pc%d.emulab.net", 100+i),
			"ipv4": fmt.Sprintf("10.1.0.%d", i), "status": "provisioning", "state": "SHUTDOWN",
			"rawstate": "SHUTDOWN", "startup_status": "none", "settle": 0,
		})
	}
	p.exps[id] = e
	writeJSON(w, 201, p.view(e))
}

const aggURN = "urn:publicid:IDN+emulab.net+authority+cm"

func (p *Portal) status(e *experiment) string {
	switch {
	case e.deleting >= 0:
		return "terminating"
	case e.gets == 0:
		return "created"
	case e.gets < p.ReadyAfter:
		return "provisioning"
	case e.fail:
		return "failed"
	}
	return "ready"
}

// view renders an experiment as the API's Experiment.
func (p *Portal) view(e *experiment) map[string]any {
	out := map[string]any{}
	for k, v := range e.data {
		out[k] = v
	}
	st := p.status(e)
	out["status"] = st
	nodes := []any{}
	for _, n := range e.nodes {
		if st == "ready" && n["status"] == "provisioning" {
			n["status"], n["state"], n["rawstate"] = "ready", "ISUP", "ISUP"
		}
		nodes = append(nodes, nodeView(n))
	}
	out["aggregates"] = map[string]any{aggURN: map[string]any{
		"urn": aggURN, "name": "emulab.net", "status": st, "nodes": nodes}}
	return out
}

func nodeView(n map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range n {
		if k != "settle" {
			out[k] = v
		}
	}
	return out
}

func (p *Portal) manifests(e *experiment) map[string]string {
	var sb strings.Builder
	sb.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
		`<rspec xmlns="http://www.geni.net/resources/rspec/3" type="manifest">` + "\n")
	for i, n := range e.nodes {
		fmt.Fprintf(&sb, `  <node client_id="%s" component_manager_id="%s" exclusive="true">`+"\n", n["client_id"], aggURN)
		fmt.Fprintf(&sb, `    <sliver_type name="raw-pc"/>`+"\n")
		if i == 0 {
			fmt.Fprintf(&sb, `    <services><login authentication="ssh-keys" hostname="%s" port="2222" username="%s"/></services>`+"\n",
				n["hostname"], p.SSHUser)
		}
		fmt.Fprintf(&sb, `    <host name="%s" ipv4="%s"/>`+"\n  </node>\n", n["hostname"], n["ipv4"])
	}
	sb.WriteString("</rspec>\n")
	return map[string]string{aggURN: sb.String()}
}

func (p *Portal) nodeOp(w http.ResponseWriter, r *http.Request, e *experiment, clientID string, rest []string) {
	var node map[string]any
	for _, n := range e.nodes {
		if n["client_id"] == clientID {
			node = n
		}
	}
	if node == nil {
		p.fail(w, r, 404, "No such node "+clientID)
		return
	}
	switch {
	case len(rest) == 0 && r.Method == http.MethodGet:
		if s, _ := node["settle"].(int); s > 0 {
			node["settle"] = s - 1
			if s == 1 {
				node["status"] = "ready"
				if node["state"] == "SHUTDOWN" {
					node["rawstate"] = "SHUTDOWN"
				} else {
					node["state"], node["rawstate"] = "ISUP", "ISUP"
				}
			}
		}
		writeJSON(w, 200, nodeView(node))
	case len(rest) == 1 && r.Method == http.MethodPost:
		switch rest[0] {
		case "reboot", "powercycle", "reload", "start":
			node["status"], node["state"] = "rebooting", "BOOTING"
		case "stop":
			node["status"], node["state"] = "stopping", "SHUTDOWN"
		default:
			p.fail(w, r, 404, "No such operation "+rest[0])
			return
		}
		node["settle"] = p.NodeSettle
		writeJSON(w, 200, nodeView(node))
	default:
		p.fail(w, r, 404, "No such path")
	}
}
