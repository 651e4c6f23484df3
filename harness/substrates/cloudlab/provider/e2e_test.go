package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/harness-testbed/terraform-provider-cloudlab/internal/fakeportal"
)

const e2eToken = "tok-E2E-SECRET-5f3a9c"

const e2eConfig = `
terraform {
  required_providers {
    cloudlab = { source = "harness/cloudlab", version = "0.1.0" }
  }
}
variable "duration" { default = 4 }
provider "cloudlab" {
  portal_url    = "%s"
  project       = "proj"
  poll_interval = "20ms"
}
resource "cloudlab_profile" "p" {
  name   = "small"
  script = "import geni.portal as portal\n"
}
resource "cloudlab_experiment" "e" {
  name            = "trial-1"
  profile_name    = cloudlab_profile.p.name
  profile_project = cloudlab_profile.p.project
  bindings        = { n = "2", hwtype = "xl170" }
  duration        = var.duration
  timeouts {
    create = "1m"
  }
}
resource "cloudlab_node_action" "r" {
  experiment_id = cloudlab_experiment.e.id
  client_id     = "node1"
  action        = "powercycle"
  triggers      = { gen = "1" }
}
data "cloudlab_experiment" "d" {
  id = cloudlab_experiment.e.id
}
output "node1" { value = cloudlab_experiment.e.nodes[0] }
output "node2" { value = cloudlab_experiment.e.nodes[1] }
output "ds_status" { value = data.cloudlab_experiment.d.status }
output "action_status" { value = cloudlab_node_action.r.status }
`

type tf struct {
	t   *testing.T
	dir string
	env []string
	log bytes.Buffer // everything terraform printed
}

func (x *tf) run(wantCode int, args ...string) string {
	x.t.Helper()
	cmd := exec.Command("terraform", args...)
	cmd.Dir, cmd.Env = x.dir, x.env
	out, err := cmd.CombinedOutput()
	x.log.Write(out)
	if os.Getenv("CLOUDLAB_E2E_SHOW") != "" {
		x.t.Logf("terraform %s\n%s", strings.Join(args, " "), out)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		x.t.Fatalf("terraform %v: %v", args, err)
	}
	if code != wantCode {
		x.t.Fatalf("terraform %v: exit %d, want %d\n%s", args, code, wantCode, out)
	}
	return string(out)
}

// setupTerraform builds the provider into a temp filesystem mirror and writes a CLI config.
func setupTerraform(t *testing.T, portalURL, token string) *tf {
	if _, err := exec.LookPath("terraform"); err != nil {
		t.Skip("terraform not on PATH: end-to-end test skipped")
	}
	tmp := t.TempDir()
	plat := runtime.GOOS + "_" + runtime.GOARCH
	bin := filepath.Join(tmp, "mirror/registry.terraform.io/harness/cloudlab/0.1.0", plat, "terraform-provider-cloudlab_v0.1.0")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	rc := filepath.Join(tmp, "terraform.rc")
	cfg := fmt.Sprintf("provider_installation {\n  filesystem_mirror {\n    path = %q\n    include = [\"registry.terraform.io/harness/cloudlab\"]\n  }\n}\ndisable_checkpoint = true\n",
		filepath.Join(tmp, "mirror"))
	root := filepath.Join(tmp, "root")
	must(t, os.WriteFile(rc, []byte(cfg), 0o644))
	must(t, os.MkdirAll(root, 0o755))
	must(t, os.WriteFile(filepath.Join(root, "main.tf"), []byte(fmt.Sprintf(e2eConfig, portalURL)), 0o644))
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + tmp, "TF_CLI_CONFIG_FILE=" + rc,
		"TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "CLOUDLAB_TOKEN=" + token,
		"TF_LOG=trace", "TF_LOG_PATH=" + filepath.Join(tmp, "tf.log")}
	return &tf{t: t, dir: root, env: env}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestTerraformEndToEnd(t *testing.T) {
	portal := fakeportal.New(e2eToken)
	srv := httptest.NewServer(portal)
	defer srv.Close()
	x := setupTerraform(t, srv.URL, e2eToken)

	x.run(0, "init", "-no-color", "-input=false")
	x.run(0, "apply", "-no-color", "-input=false", "-auto-approve")
	var outs map[string]struct{ Value any }
	must(t, json.Unmarshal([]byte(x.run(0, "output", "-json")), &outs))
	n1 := outs["node1"].Value.(map[string]any)
	n2 := outs["node2"].Value.(map[string]any)
	if n1["ssh_port"] != 2222.0 || n1["ssh_user"] != "alice" || n1["ssh_host"] != "pc101.emulab.net" || n1["ipv4"] != "10.1.0.1" {
		t.Errorf("node1 %v", n1)
	}
	if n2["ssh_port"] != 22.0 || n2["ssh_host"] != "pc102.emulab.net" {
		t.Errorf("node2 %v", n2)
	}
	if outs["ds_status"].Value != "ready" || outs["action_status"].Value != "ready" {
		t.Errorf("outputs %v", outs)
	}
	x.run(0, "plan", "-no-color", "-input=false", "-detailed-exitcode") // no drift after apply

	// extension in place; shrinking is refused at plan time
	out := x.run(0, "apply", "-no-color", "-input=false", "-auto-approve", "-var", "duration=6")
	if !strings.Contains(out, "1 changed, 0 destroyed") || portal.Count("PUT /experiments/") != 1 {
		t.Errorf("extension not in place:\n%s", out)
	}
	if out := x.run(1, "plan", "-no-color", "-input=false", "-var", "duration=3"); !strings.Contains(out, "cannot be shortened") {
		t.Errorf("shrink:\n%s", out)
	}

	// import by project,name: no replacement afterwards
	x.run(0, "state", "rm", "cloudlab_experiment.e")
	x.run(0, "import", "-no-color", "-input=false", "-var", "duration=6", "cloudlab_experiment.e", "proj,trial-1")
	if out := x.run(0, "plan", "-no-color", "-input=false", "-var", "duration=6"); strings.Contains(out, "replace") {
		t.Errorf("import leads to replacement:\n%s", out)
	}

	x.run(0, "destroy", "-no-color", "-input=false", "-auto-approve", "-var", "duration=6")
	if portal.Experiments() != 0 || portal.Count("DELETE /profiles/") != 1 {
		t.Errorf("leftovers: %d experiments; %v", portal.Experiments(), portal.Requests)
	}
	checkNoToken(t, x, e2eToken)
}

func TestTerraformBadToken(t *testing.T) {
	portal := fakeportal.New(e2eToken)
	portal.EchoToken = true
	srv := httptest.NewServer(portal)
	defer srv.Close()
	bad := "tok-E2E-WRONG-77d1e0"
	x := setupTerraform(t, srv.URL, bad)
	x.run(0, "init", "-no-color", "-input=false")
	out := x.run(1, "apply", "-no-color", "-input=false", "-auto-approve")
	if !strings.Contains(out, "refused the API token") {
		t.Errorf("want a token refused diagnostic:\n%s", out)
	}
	checkNoToken(t, x, bad)
}

// checkNoToken greps terraform's output, its trace log (with the provider's logs) and the state.
func checkNoToken(t *testing.T, x *tf, token string) {
	t.Helper()
	if strings.Contains(x.log.String(), token) {
		t.Error("token in terraform output")
	}
	for _, f := range []string{filepath.Join(x.dir, "terraform.tfstate"), filepath.Join(filepath.Dir(x.dir), "tf.log")} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if bytes.Contains(data, []byte(token)) {
			t.Errorf("token found in %s", filepath.Base(f))
		}
	}
	if data, err := os.ReadFile(filepath.Join(filepath.Dir(x.dir), "tf.log")); err != nil || len(data) == 0 {
		t.Error("no trace log written: the token check of the logs proved nothing")
	}
}
