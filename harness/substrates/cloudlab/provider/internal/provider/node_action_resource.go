package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/harness-testbed/terraform-provider-cloudlab/internal/client"
)

const defaultNodeActionTimeout = 20 * time.Minute

type nodeActionResource struct{ pd *providerData }

type nodeActionModel struct {
	ID           types.String   `tfsdk:"id"`
	ExperimentID types.String   `tfsdk:"experiment_id"`
	ClientID     types.String   `tfsdk:"client_id"`
	Action       types.String   `tfsdk:"action"`
	Triggers     types.Map      `tfsdk:"triggers"`
	Status       types.String   `tfsdk:"status"`
	State        types.String   `tfsdk:"state"`
	Timeouts     timeouts.Value `tfsdk:"timeouts"`
}

var _ resource.ResourceWithConfigure = (*nodeActionResource)(nil)

func newNodeActionResource() resource.Resource { return &nodeActionResource{} }

func (r *nodeActionResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_node_action"
}

func (r *nodeActionResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.pd = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (r *nodeActionResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		Description: "Runs a power/boot action on one node of an experiment when created (or when " +
			"`triggers` change) and waits until the node settles. Destroying it does nothing.",
		Attributes: map[string]schema.Attribute{
			"id":            schema.StringAttribute{Computed: true, PlanModifiers: keep},
			"experiment_id": schema.StringAttribute{Required: true, PlanModifiers: replace, Description: "UUID or `project,name`."},
			"client_id":     schema.StringAttribute{Required: true, PlanModifiers: replace, Description: "Node name in the profile."},
			"action": schema.StringAttribute{Required: true, PlanModifiers: replace,
				Validators:  []validator.String{stringvalidator.OneOf(client.NodeActions...)},
				Description: "One of reboot, powercycle, reload, start, stop."},
			"triggers": schema.MapAttribute{Optional: true, ElementType: types.StringType,
				PlanModifiers: []planmodifier.Map{mapplanmodifier.RequiresReplace()},
				Description:   "Arbitrary values; a change runs the action again."},
			"status": schema.StringAttribute{Computed: true, PlanModifiers: keep},
			"state":  schema.StringAttribute{Computed: true, PlanModifiers: keep},
		},
		Blocks: map[string]schema.Block{"timeouts": timeouts.Block(ctx, timeouts.Opts{Create: true})},
	}
}

func (r *nodeActionResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m nodeActionModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	to, d := m.Timeouts.Create(ctx, defaultNodeActionTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, to)
	defer cancel()
	resp.Diagnostics.Append(r.run(ctx, &m)...)
	if !resp.Diagnostics.HasError() {
		resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	}
}

// run posts the action and waits until the node settles (status ready; failed is an error).
func (r *nodeActionResource) run(ctx context.Context, m *nodeActionModel) (diags diag.Diagnostics) {
	if r.pd == nil {
		notConfigured(&diags)
		return diags
	}
	exp, cid, action := m.ExperimentID.ValueString(), m.ClientID.ValueString(), m.Action.ValueString()
	first, err := r.pd.client.NodeAction(ctx, exp, cid, action)
	if err != nil {
		diags.AddError("Cannot "+action+" CloudLab node "+cid, err.Error())
		return diags
	}
	n, err := r.pd.client.WaitNodeSettled(ctx, exp, cid, action, first, r.pd.poll)
	if err != nil {
		diags.AddError("CloudLab node "+cid+" did not settle after "+action, err.Error())
		return diags
	}
	m.ID = types.StringValue(exp + "/" + cid + "/" + action + "/" + time.Now().UTC().Format(time.RFC3339Nano))
	m.Status = types.StringValue(n.Status)
	m.State = types.StringValue(n.State)
	return diags
}

func (r *nodeActionResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m nodeActionModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if r.pd == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	n, err := r.pd.client.GetNode(ctx, m.ExperimentID.ValueString(), m.ClientID.ValueString())
	if client.IsNotFound(err) {
		resp.State.RemoveResource(ctx) // experiment or node gone: the action is moot
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot read CloudLab node "+m.ClientID.ValueString(), err.Error())
		return
	}
	m.Status = types.StringValue(n.Status)
	m.State = types.StringValue(n.State)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Update only happens for a change of the timeouts block: nothing to do on the portal.
func (r *nodeActionResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan nodeActionModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if !resp.Diagnostics.HasError() {
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	}
}

// Delete only forgets the action.
func (r *nodeActionResource) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {
}
