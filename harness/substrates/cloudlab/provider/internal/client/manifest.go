package client

import (
	"encoding/xml"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ManifestNode is what one `<node>` of an RSpec v3 manifest says about access.
type ManifestNode struct {
	ClientID string
	HostName string // <host name>
	IPv4     string // <host ipv4>
	SSHUser  string // <services><login username>
	SSHHost  string // <services><login hostname>
	SSHPort  int    // <services><login port>; 0 when there is no login element
}

type xmlRSpec struct {
	Nodes []struct {
		ClientID string `xml:"client_id,attr"`
		Host     struct {
			Name string `xml:"name,attr"`
			IPv4 string `xml:"ipv4,attr"`
		} `xml:"host"`
		Logins []struct {
			Username string `xml:"username,attr"`
			Hostname string `xml:"hostname,attr"`
			Port     string `xml:"port,attr"`
		} `xml:"services>login"`
	} `xml:"node"`
}

// ParseManifest reads the nodes of one RSpec v3 manifest (namespaces are ignored).
// When a node has several <login> elements (one per user) the first one is used.
func ParseManifest(doc string) (map[string]ManifestNode, error) {
	var r xmlRSpec
	if err := xml.Unmarshal([]byte(doc), &r); err != nil {
		return nil, fmt.Errorf("manifest is not RSpec XML: %v", err)
	}
	out := make(map[string]ManifestNode, len(r.Nodes))
	for _, n := range r.Nodes {
		if n.ClientID == "" {
			continue
		}
		mn := ManifestNode{ClientID: n.ClientID, HostName: n.Host.Name, IPv4: n.Host.IPv4}
		if len(n.Logins) > 0 {
			l := n.Logins[0]
			mn.SSHUser, mn.SSHHost = l.Username, l.Hostname
			mn.SSHPort = 22
			if p, err := strconv.Atoi(strings.TrimSpace(l.Port)); err == nil && p > 0 && p < 65536 {
				mn.SSHPort = p
			}
		}
		out[n.ClientID] = mn
	}
	return out, nil
}

// NodeInfo is one node with its SSH endpoint, as the Terraform resources expose it.
type NodeInfo struct {
	ClientID string
	Hostname string
	IPv4     string
	SSHHost  string
	SSHPort  int64
	SSHUser  string
	Status   string
	State    string
}

// BuildNodes merges aggregates[*].nodes[] with the manifests (which may be nil).
// The SSH endpoint comes from the manifest's <login>, else hostname:22. Nodes only
// in a manifest are included too. Unparseable manifests are skipped and reported.
func BuildNodes(exp *Experiment, manifests map[string]string) ([]NodeInfo, []error) {
	var errs []error
	man := map[string]ManifestNode{}
	keys := make([]string, 0, len(manifests))
	for k := range manifests {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		nodes, err := ParseManifest(manifests[k])
		if err != nil {
			errs = append(errs, fmt.Errorf("manifest %s: %w", k, err))
			continue
		}
		for id, n := range nodes {
			man[id] = n
		}
	}
	seen := map[string]bool{}
	var out []NodeInfo
	add := func(n NodeInfo) {
		m, ok := man[n.ClientID]
		if ok {
			n.Hostname = firstOf(n.Hostname, m.HostName)
			n.IPv4 = firstOf(n.IPv4, m.IPv4)
			n.SSHUser = m.SSHUser
			n.SSHHost = m.SSHHost
			n.SSHPort = int64(m.SSHPort)
		}
		n.SSHHost = firstOf(n.SSHHost, n.Hostname, n.IPv4)
		if n.SSHPort == 0 {
			n.SSHPort = 22
		}
		seen[n.ClientID] = true
		out = append(out, n)
	}
	for _, agg := range exp.AggregateList() {
		for _, an := range agg.Nodes {
			if an.ClientID == "" || seen[an.ClientID] {
				continue
			}
			add(NodeInfo{ClientID: an.ClientID, Hostname: an.Hostname, IPv4: an.IPv4, Status: an.Status, State: an.State})
		}
	}
	for id, m := range man {
		if !seen[id] {
			add(NodeInfo{ClientID: id, Hostname: m.HostName, IPv4: m.IPv4})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return naturalLess(out[i].ClientID, out[j].ClientID) })
	return out, errs
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// naturalLess orders node2 before node10.
func naturalLess(a, b string) bool {
	pa, na := splitNum(a)
	pb, nb := splitNum(b)
	if pa != pb || na < 0 || nb < 0 {
		return a < b
	}
	return na < nb
}

func splitNum(s string) (string, int) {
	i := len(s)
	for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
		i--
	}
	n, err := strconv.Atoi(s[i:])
	if err != nil {
		return s, -1
	}
	return s[:i], n
}
