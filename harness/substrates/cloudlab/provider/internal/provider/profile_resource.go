package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/harness-testbed/terraform-provider-cloudlab/internal/client"
)

type profileResource struct{ pd *providerData }

type profileModel struct {
	ID              types.String `tfsdk:"id"`
	Name            types.String `tfsdk:"name"`
	Project         types.String `tfsdk:"project"`
	Script          types.String `tfsdk:"script"`
	Public          types.Bool   `tfsdk:"public"`
	ProjectWritable types.Bool   `tfsdk:"project_writable"`
	Version         types.Int64  `tfsdk:"version"`
}

var (
	_ resource.ResourceWithConfigure   = (*profileResource)(nil)
	_ resource.ResourceWithImportState = (*profileResource)(nil)
	_ resource.ResourceWithModifyPlan  = (*profileResource)(nil)
)

func newProfileResource() resource.Resource { return &profileResource{} }

func (r *profileResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_profile"
}

func (r *profileResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.pd = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (r *profileResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "A CloudLab profile from a geni-lib script.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": schema.StringAttribute{Required: true, PlanModifiers: replace},
			"project": schema.StringAttribute{Optional: true, Computed: true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown(), stringplanmodifier.RequiresReplace()},
				Description:   "Project; defaults to the provider's `project`."},
			"script": schema.StringAttribute{Required: true,
				Description: "geni-lib Python script; changed in place (PATCH, new version)."},
			"public":           schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false)},
			"project_writable": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false)},
			"version":          schema.Int64Attribute{Computed: true, Description: "Current profile version."},
		},
	}
}

func (r *profileResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || r.pd == nil || r.pd.project == "" {
		return
	}
	var project types.String
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("project"), &project)...)
	if project.IsUnknown() {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("project"), r.pd.project)...)
	}
}

func (r *profileResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root("id"), req, resp)
}

func fillProfile(m *profileModel, p *client.Profile) {
	m.ID = types.StringValue(p.ID)
	if p.Name != "" {
		m.Name = types.StringValue(p.Name)
	}
	if p.Project != "" {
		m.Project = types.StringValue(p.Project)
	}
	m.Public = types.BoolValue(p.Public)
	m.ProjectWritable = types.BoolValue(p.ProjectWritable)
	m.Version = types.Int64Value(int64(p.Version))
	// The script is kept from the configuration (the portal may reformat it); only an
	// import, which has none, takes it from the current version.
	if m.Script.IsNull() || m.Script.IsUnknown() {
		m.Script = stringOrNull(p.CurrentScript())
	}
}

func (r *profileResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m profileModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(r.create(ctx, &m)...)
	if !resp.Diagnostics.HasError() {
		resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	}
}

func (r *profileResource) create(ctx context.Context, m *profileModel) (diags diag.Diagnostics) {
	if r.pd == nil {
		notConfigured(&diags)
		return diags
	}
	if m.Project.IsUnknown() || m.Project.IsNull() {
		m.Project = stringOrNull(r.pd.project)
	}
	if m.Project.ValueString() == "" {
		diags.AddError("No CloudLab project", "Set `project` on the cloudlab_profile or in the provider block.")
		return diags
	}
	p, err := r.pd.client.CreateProfile(ctx, client.ProfileCreate{Name: m.Name.ValueString(),
		Project: m.Project.ValueString(), Script: m.Script.ValueString(),
		Public: m.Public.ValueBool(), ProjectWritable: m.ProjectWritable.ValueBool()})
	if err != nil {
		diags.AddError("Cannot create CloudLab profile "+m.Project.ValueString()+","+m.Name.ValueString(), err.Error())
		return diags
	}
	fillProfile(m, p)
	return diags
}

func (r *profileResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m profileModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if r.pd == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	p, err := r.pd.client.GetProfile(ctx, m.ID.ValueString())
	if client.IsNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot read CloudLab profile "+m.ID.ValueString(), err.Error())
		return
	}
	fillProfile(&m, p)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *profileResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state profileModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(r.update(ctx, &plan, &state)...)
	if !resp.Diagnostics.HasError() {
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	}
}

// update PATCHes only what changed.
func (r *profileResource) update(ctx context.Context, plan, state *profileModel) (diags diag.Diagnostics) {
	if r.pd == nil {
		notConfigured(&diags)
		return diags
	}
	var in client.ProfileUpdate
	if !plan.Script.Equal(state.Script) {
		s := plan.Script.ValueString()
		in.Script = &s
	}
	if !plan.Public.Equal(state.Public) {
		b := plan.Public.ValueBool()
		in.Public = &b
	}
	if !plan.ProjectWritable.Equal(state.ProjectWritable) {
		b := plan.ProjectWritable.ValueBool()
		in.ProjectWritable = &b
	}
	plan.ID = state.ID
	var p *client.Profile
	var err error
	if in.Script == nil && in.Public == nil && in.ProjectWritable == nil {
		p, err = r.pd.client.GetProfile(ctx, state.ID.ValueString())
	} else {
		p, err = r.pd.client.UpdateProfile(ctx, state.ID.ValueString(), in)
	}
	if err != nil {
		diags.AddError("Cannot update CloudLab profile "+state.ID.ValueString(), err.Error())
		return diags
	}
	fillProfile(plan, p)
	return diags
}

func (r *profileResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m profileModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if r.pd == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	if err := r.pd.client.DeleteProfile(ctx, m.ID.ValueString()); err != nil {
		resp.Diagnostics.AddError("Cannot delete CloudLab profile "+m.ID.ValueString(), err.Error())
	}
}
