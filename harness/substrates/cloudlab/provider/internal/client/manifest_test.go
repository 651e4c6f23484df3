package client

import "testing"

func TestParseManifest(t *testing.T) {
	doc := `<rspec xmlns="http://www.geni.net/resources/rspec/3" type="manifest">
 <node client_id="node1"><services>
   <login authentication="ssh-keys" hostname="pc1.utah" port="2222" username="alice"/>
   <login authentication="ssh-keys" hostname="pc1.utah" port="22" username="bob"/></services>
   <interface client_id="node1:if0"><ip address="10.10.1.1" type="ipv4" netmask="255.255.255.0"/></interface>
   <host name="pc1.utah.cloudlab.us" ipv4="128.110.1.1"/></node>
 <node client_id="node2"><host name="pc2.utah.cloudlab.us" ipv4="128.110.1.2"/></node>
</rspec>`
	m, err := ParseManifest(doc)
	if err != nil {
		t.Fatal(err)
	}
	want1 := ManifestNode{ClientID: "node1", HostName: "pc1.utah.cloudlab.us", IPv4: "128.110.1.1",
		SSHUser: "alice", SSHHost: "pc1.utah", SSHPort: 2222}
	if m["node1"] != want1 {
		t.Errorf("node1 %+v", m["node1"])
	}
	if m["node2"].SSHPort != 0 || m["node2"].HostName != "pc2.utah.cloudlab.us" {
		t.Errorf("node2 %+v", m["node2"])
	}
	if _, err := ParseManifest("not xml <"); err == nil {
		t.Error("bad XML accepted")
	}
}

func TestBindingsAndAggregatesTolerant(t *testing.T) {
	e := Experiment{Bindings: []byte(`"{\"n\": 3, \"image\": \"urn:x\"}"`),
		Aggregates: []byte(`[{"urn":"u","nodes":[{"client_id":"node10"},{"client_id":"node2"}]}]`)}
	b := e.BindingStrings()
	if b["n"] != "3" || b["image"] != "urn:x" {
		t.Errorf("bindings %v", b)
	}
	nodes, _ := BuildNodes(&e, nil)
	if len(nodes) != 2 || nodes[0].ClientID != "node2" || nodes[1].SSHPort != 22 {
		t.Errorf("nodes %+v", nodes)
	}
}
