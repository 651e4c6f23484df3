package provider

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/harness-testbed/terraform-provider-cloudlab/internal/client"
)

func (r *experimentResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m experimentModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	createTO, d := m.Timeouts.Create(ctx, defaultCreateTimeout)
	resp.Diagnostics.Append(d...)
	deleteTO, d := m.Timeouts.Delete(ctx, defaultDeleteTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	save, diags := r.create(ctx, &m, createTO, deleteTO)
	resp.Diagnostics.Append(diags...)
	if save {
		resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	}
}

// create posts the experiment and waits until it is ready. On a failure after the
// POST it terminates the experiment; only when that fails too is the (tainted)
// experiment kept in the state (save=true with errors) so destroy can retry.
func (r *experimentResource) create(ctx context.Context, m *experimentModel, createTO, deleteTO time.Duration) (save bool, diags diag.Diagnostics) {
	if r.pd == nil {
		notConfigured(&diags)
		return false, diags
	}
	c := r.pd.client
	if m.Project.IsUnknown() || m.Project.IsNull() {
		m.Project = stringOrNull(r.pd.project)
	}
	in := client.ExperimentCreate{Name: m.Name.ValueString(), Project: m.Project.ValueString(),
		Group: m.Group.ValueString(), ProfileName: m.ProfileName.ValueString(),
		ProfileProject: m.ProfileProject.ValueString(), Duration: m.Duration.ValueInt64(),
		SSHPubKey: m.SSHPubKey.ValueString()}
	if in.Project == "" {
		diags.AddError("No CloudLab project", "Set `project` on the cloudlab_experiment or in the provider block.")
		return false, diags
	}
	if !m.Bindings.IsNull() && !m.Bindings.IsUnknown() {
		diags.Append(m.Bindings.ElementsAs(ctx, &in.Bindings, false)...)
		if diags.HasError() {
			return false, diags
		}
	}
	cctx, cancel := context.WithTimeout(ctx, createTO)
	defer cancel()
	exp, err := c.CreateExperiment(cctx, in)
	if err != nil {
		diags.AddError("Cannot create CloudLab experiment "+in.Project+","+in.Name, err.Error())
		return false, diags
	}
	ready, err := c.WaitExperimentReady(cctx, exp.ID, r.pd.poll)
	if err == nil {
		diags.Append(fillExperiment(ctx, c, m, ready, false)...)
		return true, diags
	}
	summary := "CloudLab experiment " + in.Project + "," + in.Name + " did not become ready"
	cleanErr := terminate(context.WithoutCancel(ctx), c, exp.ID, deleteTO, r.pd.poll)
	if cleanErr == nil {
		diags.AddError(summary, err.Error()+"\nThe experiment was terminated, nothing is left behind.")
		return false, diags
	}
	diags.AddError(summary, fmt.Sprintf("%v\nTerminating it failed too: %v\n"+
		"It stays in the state (tainted) so that `terraform destroy` can retry.", err, cleanErr))
	if ready == nil {
		ready = exp
	}
	diags.Append(fillExperiment(ctx, c, m, ready, false)...)
	return true, diags
}

// terminate deletes an experiment and waits until GET answers 404.
func terminate(ctx context.Context, c *client.Client, id string, timeout, every time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := c.DeleteExperiment(ctx, id); err != nil {
		return err
	}
	return c.WaitExperimentGone(ctx, id, every)
}

// fillExperiment copies the portal's view into the model and reads the nodes.
// importing also copies what only the configuration normally holds.
func fillExperiment(ctx context.Context, c *client.Client, m *experimentModel, exp *client.Experiment, importing bool) diag.Diagnostics {
	set := func(dst *types.String, v string) {
		if v != "" {
			*dst = types.StringValue(v)
		} else if dst.IsUnknown() {
			*dst = types.StringNull()
		}
	}
	m.ID = types.StringValue(exp.ID)
	set(&m.Name, exp.Name)
	set(&m.Project, exp.Project)
	set(&m.Group, exp.Group)
	set(&m.ProfileName, exp.ProfileName)
	set(&m.ProfileProject, exp.ProfileProject)
	m.Status = types.StringValue(exp.Status)
	m.URL = stringOrNull(exp.URL)
	m.ExpiresAt = stringOrNull(exp.ExpiresAt)
	var diags diag.Diagnostics
	if importing {
		if b := exp.BindingStrings(); len(b) > 0 {
			v, d := types.MapValueFrom(ctx, types.StringType, b)
			diags.Append(d...)
			m.Bindings = v
		}
		m.SSHPubKey = stringOrNull(exp.SSHPubKey)
		m.Duration = importedDuration(exp)
	}
	nodes, d := experimentNodes(ctx, c, exp)
	diags.Append(d...)
	m.Nodes = nodes
	return diags
}

// importedDuration guesses `duration` from expires_at - started_at/created_at (whole hours).
func importedDuration(exp *client.Experiment) types.Int64 {
	start := exp.StartedAt
	if start == "" {
		start = exp.CreatedAt
	}
	s, err1 := time.Parse(time.RFC3339, start)
	e, err2 := time.Parse(time.RFC3339, exp.ExpiresAt)
	if err1 != nil || err2 != nil || !e.After(s) {
		return types.Int64Null()
	}
	return types.Int64Value(int64(math.Round(e.Sub(s).Hours())))
}

func (r *experimentResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m experimentModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	found, diags := r.read(ctx, &m)
	resp.Diagnostics.Append(diags...)
	if !found {
		resp.State.RemoveResource(ctx)
		return
	}
	if !diags.HasError() {
		resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	}
}

// read refreshes m; found=false when the portal answers 404.
func (r *experimentResource) read(ctx context.Context, m *experimentModel) (found bool, diags diag.Diagnostics) {
	if r.pd == nil {
		notConfigured(&diags)
		return true, diags
	}
	exp, err := r.pd.client.GetExperiment(ctx, m.ID.ValueString())
	if client.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		diags.AddError("Cannot read CloudLab experiment "+m.ID.ValueString(), err.Error())
		return true, diags
	}
	return true, fillExperiment(ctx, r.pd.client, m, exp, m.Name.IsNull())
}

func (r *experimentResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state experimentModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	to, d := plan.Timeouts.Update(ctx, defaultUpdateTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, to)
	defer cancel()
	resp.Diagnostics.Append(r.update(ctx, &plan, &state)...)
	if !resp.Diagnostics.HasError() {
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	}
}

// update applies an in-place change: only `duration` (extension) talks to the portal.
func (r *experimentResource) update(ctx context.Context, plan, state *experimentModel) (diags diag.Diagnostics) {
	if r.pd == nil {
		notConfigured(&diags)
		return diags
	}
	c := r.pd.client
	id := state.ID.ValueString()
	plan.ID, plan.URL, plan.Nodes = state.ID, state.URL, state.Nodes
	var exp *client.Experiment
	var err error
	switch {
	case !plan.Duration.IsNull() && !state.Duration.IsNull():
		delta := plan.Duration.ValueInt64() - state.Duration.ValueInt64()
		if delta < 0 {
			diags.AddError("CloudLab experiments cannot be shortened",
				fmt.Sprintf("duration %d -> %d: the API only extends.", state.Duration.ValueInt64(), plan.Duration.ValueInt64()))
			return diags
		}
		if delta > 0 {
			reason := fmt.Sprintf("terraform: duration %d -> %d hours", state.Duration.ValueInt64(), plan.Duration.ValueInt64())
			if exp, err = c.ExtendExperiment(ctx, id, delta, reason); err != nil {
				diags.AddError("Cannot extend CloudLab experiment "+id, err.Error())
				return diags
			}
		}
	case !plan.Duration.IsNull():
		diags.AddWarning("CloudLab experiment duration recorded, not applied",
			"The experiment was created without `duration`, so there is nothing to extend from; "+
				"its expiry is unchanged. Later increases extend it by the difference.")
	}
	if exp == nil || exp.Status == "" {
		if exp, err = c.GetExperiment(ctx, id); err != nil {
			diags.AddError("Cannot read CloudLab experiment "+id, err.Error())
			return diags
		}
	}
	plan.Status = types.StringValue(exp.Status)
	plan.ExpiresAt = stringOrNull(exp.ExpiresAt)
	return diags
}

func (r *experimentResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m experimentModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	to, d := m.Timeouts.Delete(ctx, defaultDeleteTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	if r.pd == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	if err := terminate(ctx, r.pd.client, m.ID.ValueString(), to, r.pd.poll); err != nil {
		resp.Diagnostics.AddError("Cannot terminate CloudLab experiment "+m.ID.ValueString(), err.Error())
	}
}
