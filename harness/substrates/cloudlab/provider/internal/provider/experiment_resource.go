package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// Default timeouts of cloudlab_experiment.
const (
	defaultCreateTimeout = 30 * time.Minute
	defaultUpdateTimeout = 5 * time.Minute
	defaultDeleteTimeout = 15 * time.Minute
)

type experimentResource struct{ pd *providerData }

type experimentModel struct {
	ID             types.String   `tfsdk:"id"`
	Name           types.String   `tfsdk:"name"`
	Project        types.String   `tfsdk:"project"`
	Group          types.String   `tfsdk:"group"`
	ProfileName    types.String   `tfsdk:"profile_name"`
	ProfileProject types.String   `tfsdk:"profile_project"`
	Bindings       types.Map      `tfsdk:"bindings"`
	Duration       types.Int64    `tfsdk:"duration"`
	SSHPubKey      types.String   `tfsdk:"sshpubkey"`
	Status         types.String   `tfsdk:"status"`
	URL            types.String   `tfsdk:"url"`
	ExpiresAt      types.String   `tfsdk:"expires_at"`
	Nodes          types.List     `tfsdk:"nodes"`
	Timeouts       timeouts.Value `tfsdk:"timeouts"`
}

var (
	_ resource.ResourceWithConfigure   = (*experimentResource)(nil)
	_ resource.ResourceWithImportState = (*experimentResource)(nil)
	_ resource.ResourceWithModifyPlan  = (*experimentResource)(nil)
)

func newExperimentResource() resource.Resource { return &experimentResource{} }

func (r *experimentResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_experiment"
}

func (r *experimentResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.pd = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (r *experimentResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	keepReplace := []planmodifier.String{stringplanmodifier.UseStateForUnknown(), stringplanmodifier.RequiresReplace()}
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		Description: "A CloudLab experiment: created from a profile, polled until `ready`, terminated on destroy.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, PlanModifiers: keep,
				Description: "Experiment UUID."},
			"name": schema.StringAttribute{Required: true, PlanModifiers: replace},
			"project": schema.StringAttribute{Optional: true, Computed: true, PlanModifiers: keepReplace,
				Description: "Project; defaults to the provider's `project`."},
			"group": schema.StringAttribute{Optional: true, Computed: true, PlanModifiers: keepReplace,
				Description: "Project subgroup; the portal's default when unset."},
			"profile_name":    schema.StringAttribute{Required: true, PlanModifiers: replace},
			"profile_project": schema.StringAttribute{Required: true, PlanModifiers: replace},
			"bindings": schema.MapAttribute{Optional: true, ElementType: types.StringType,
				PlanModifiers: []planmodifier.Map{mapplanmodifier.RequiresReplace()},
				Description: "Profile parameter values. Every value is sent as a JSON string " +
					"(\"3\", not 3): the API does not say which it wants, and geni-lib converts strings."},
			"duration": schema.Int64Attribute{Optional: true,
				Validators: []validator.Int64{int64validator.AtLeast(1)},
				Description: "Hours until expiry. Raising it extends the experiment in place " +
					"(PUT extend_by the difference); lowering it is an error."},
			"sshpubkey": schema.StringAttribute{Optional: true, PlanModifiers: replace},
			"status": schema.StringAttribute{Computed: true,
				Description: "Portal status (created, provisioning, ready, failed, ...)."},
			"url": schema.StringAttribute{Computed: true, PlanModifiers: keep,
				Description: "Portal page of the experiment."},
			"expires_at": schema.StringAttribute{Computed: true},
			"nodes": schema.ListNestedAttribute{Computed: true,
				PlanModifiers: []planmodifier.List{listplanmodifier.UseStateForUnknown()},
				Description:   "Nodes, ordered by client_id; the SSH endpoint comes from the manifest <login> (else hostname:22).",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"client_id": schema.StringAttribute{Computed: true},
					"hostname":  schema.StringAttribute{Computed: true},
					"ipv4":      schema.StringAttribute{Computed: true},
					"ssh_host":  schema.StringAttribute{Computed: true},
					"ssh_port":  schema.Int64Attribute{Computed: true},
					"ssh_user":  schema.StringAttribute{Computed: true},
					"status":    schema.StringAttribute{Computed: true},
					"state":     schema.StringAttribute{Computed: true},
				}}},
		},
		Blocks: map[string]schema.Block{
			"timeouts": timeouts.Block(ctx, timeouts.Opts{Create: true, Update: true, Delete: true}),
		},
	}
}

// ModifyPlan fills the default project and refuses to shorten an experiment.
func (r *experimentResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return // destroy
	}
	var plan experimentModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if plan.Project.IsUnknown() && r.pd != nil && r.pd.project != "" {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("project"), r.pd.project)...)
	}
	if req.State.Raw.IsNull() {
		return
	}
	var state experimentModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || plan.Duration.IsUnknown() || plan.Duration.IsNull() || state.Duration.IsNull() {
		return
	}
	if plan.Duration.ValueInt64() < state.Duration.ValueInt64() {
		resp.Diagnostics.AddAttributeError(path.Root("duration"), "CloudLab experiments cannot be shortened",
			fmt.Sprintf("duration can only grow (the API only extends): %d -> %d hours. Keep %d or replace the experiment.",
				state.Duration.ValueInt64(), plan.Duration.ValueInt64(), state.Duration.ValueInt64()))
	}
}

// ImportState accepts a UUID or `project,name`; Read resolves it to the UUID.
func (r *experimentResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root("id"), req, resp)
}
