package provider

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/types"
)

func nodesOf(t *testing.T, m experimentModel) []nodeModel {
	t.Helper()
	var ns []nodeModel
	if d := m.Nodes.ElementsAs(context.Background(), &ns, false); d.HasError() {
		t.Fatal(d)
	}
	return ns
}

func TestExperimentCRUD(t *testing.T) {
	p, pd, _ := testEnv(t, testToken)
	r := &experimentResource{pd: pd}
	ctx := context.Background()
	m := newPlan("exp1", map[string]string{"n": "3"})
	save, diags := r.create(ctx, &m, time.Minute, time.Minute)
	if !save || diags.HasError() {
		t.Fatal(diags)
	}
	if m.Status.ValueString() != "ready" || m.Project.ValueString() != "proj" || m.Group.ValueString() != "proj" ||
		!strings.HasPrefix(m.URL.ValueString(), "https://portal.example/") || m.ExpiresAt.IsNull() {
		t.Fatalf("state after create: %+v", m)
	}
	ns := nodesOf(t, m)
	if len(ns) != 3 || ns[0].SSHPort.ValueInt64() != 2222 || ns[0].SSHUser.ValueString() != "alice" ||
		ns[2].SSHPort.ValueInt64() != 22 || ns[2].SSHHost.ValueString() != "pc103.emulab.net" {
		t.Fatalf("nodes %+v", ns)
	}

	// extension in place
	state := m
	plan := m
	plan.Duration = types.Int64Value(6)
	plan.Status, plan.ExpiresAt = types.StringUnknown(), types.StringUnknown()
	if d := r.update(ctx, &plan, &state); d.HasError() {
		t.Fatal(d)
	}
	if p.Count("PUT /experiments/"+m.ID.ValueString()) != 1 || !strings.Contains(p.Bodies[len(p.Bodies)-1], `"extend_by":2`) {
		t.Fatalf("want PUT extend_by 2: %v %v", p.Requests, p.Bodies)
	}
	if plan.ExpiresAt.Equal(state.ExpiresAt) || plan.Status.ValueString() != "ready" {
		t.Errorf("expires_at not refreshed: %s", plan.ExpiresAt)
	}
	shrink := plan
	shrink.Duration = types.Int64Value(1)
	if d := r.update(ctx, &shrink, &plan); !d.HasError() {
		t.Error("shrinking accepted")
	}

	// import by project,name
	imp := experimentModel{ID: types.StringValue("proj,exp1"), Name: types.StringNull(), Project: types.StringNull(),
		Group: types.StringNull(), ProfileName: types.StringNull(), ProfileProject: types.StringNull(),
		Bindings: types.MapNull(types.StringType), Duration: types.Int64Null(), SSHPubKey: types.StringNull()}
	found, d := r.read(ctx, &imp)
	if !found || d.HasError() {
		t.Fatal(d)
	}
	if imp.ID != m.ID || imp.Name.ValueString() != "exp1" || imp.Duration.ValueInt64() != 6 || !imp.Bindings.Equal(m.Bindings) {
		t.Errorf("import: %+v", imp)
	}

	// delete: asynchronous on the portal, waited for
	if err := terminate(ctx, pd.client, m.ID.ValueString(), time.Minute, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if p.Experiments() != 0 || p.Count("GET /experiments/"+m.ID.ValueString()) < 5 {
		t.Fatalf("not gone: %d; %v", p.Experiments(), p.Requests)
	}
	if found, d := r.read(ctx, &m); found || d.HasError() {
		t.Fatalf("read after delete: found=%v %v", found, d)
	}
}

func TestExperimentFailedIsCleanedUp(t *testing.T) {
	p, pd, _ := testEnv(t, testToken)
	r := &experimentResource{pd: pd}
	m := newPlan("will-fail", nil)
	save, diags := r.create(context.Background(), &m, time.Minute, time.Minute)
	if save || !diags.HasError() {
		t.Fatalf("save=%v %v", save, diags)
	}
	detail := diags.Errors()[0].Detail()
	if !strings.Contains(detail, `"failed"`) || !strings.Contains(detail, "https://portal.example/status.php?uuid=") ||
		!strings.Contains(detail, "terminated") {
		t.Errorf("detail: %s", detail)
	}
	if p.Experiments() != 0 || p.Count("DELETE /experiments/") != 1 {
		t.Errorf("failed experiment leaked: %d %v", p.Experiments(), p.Requests)
	}
}

func TestExperimentCreateTimeoutCleansUp(t *testing.T) {
	p, pd, _ := testEnv(t, testToken)
	p.ReadyAfter = 1 << 30
	r := &experimentResource{pd: pd}
	m := newPlan("slow", nil)
	save, diags := r.create(context.Background(), &m, 50*time.Millisecond, time.Minute)
	if save || !diags.HasError() || !strings.Contains(diags.Errors()[0].Detail(), "last status: provisioning") {
		t.Fatalf("save=%v %v", save, diags)
	}
	if p.Experiments() != 0 {
		t.Error("timed-out experiment leaked")
	}
}

func TestProfileAndNodeAction(t *testing.T) {
	p, pd, _ := testEnv(t, testToken)
	ctx := context.Background()
	pr := &profileResource{pd: pd}
	m := profileModel{Name: types.StringValue("small"), Project: types.StringUnknown(), Script: types.StringValue("v1"),
		Public: types.BoolValue(false), ProjectWritable: types.BoolValue(false)}
	p.Busy429 = 1
	if d := pr.create(ctx, &m); d.HasError() {
		t.Fatal(d)
	}
	if m.Version.ValueInt64() != 1 || m.Project.ValueString() != "proj" || m.ID.IsUnknown() {
		t.Fatalf("%+v", m)
	}
	plan := m
	plan.Script, plan.Public = types.StringValue("v2"), types.BoolValue(true)
	if d := pr.update(ctx, &plan, &m); d.HasError() {
		t.Fatal(d)
	}
	if plan.Version.ValueInt64() != 2 || !plan.Public.ValueBool() {
		t.Fatalf("%+v", plan)
	}

	e := &experimentResource{pd: pd}
	em := newPlan("exp2", nil)
	if _, d := e.create(ctx, &em, time.Minute, time.Minute); d.HasError() {
		t.Fatal(d)
	}
	na := &nodeActionResource{pd: pd}
	am := nodeActionModel{ExperimentID: types.StringValue("proj,exp2"), ClientID: types.StringValue("node1"),
		Action: types.StringValue("reboot")}
	if d := na.run(ctx, &am); d.HasError() {
		t.Fatal(d)
	}
	if am.Status.ValueString() != "ready" || am.State.ValueString() != "ISUP" {
		t.Fatalf("%+v", am)
	}
	if p.Count("POST /experiments/proj,exp2/node/node1/reboot") != 1 {
		t.Errorf("%v", p.Requests)
	}
}
