package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

type experimentDataSource struct{ pd *providerData }

type experimentDataModel struct {
	ID             types.String `tfsdk:"id"`
	Name           types.String `tfsdk:"name"`
	Project        types.String `tfsdk:"project"`
	Group          types.String `tfsdk:"group"`
	ProfileName    types.String `tfsdk:"profile_name"`
	ProfileProject types.String `tfsdk:"profile_project"`
	Status         types.String `tfsdk:"status"`
	URL            types.String `tfsdk:"url"`
	ExpiresAt      types.String `tfsdk:"expires_at"`
	Nodes          types.List   `tfsdk:"nodes"`
}

var _ datasource.DataSourceWithConfigure = (*experimentDataSource)(nil)

func newExperimentDataSource() datasource.DataSource { return &experimentDataSource{} }

func (d *experimentDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_experiment"
}

func (d *experimentDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.pd = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *experimentDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	oc := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Optional: true, Computed: true, Description: desc}
	}
	c := func() schema.StringAttribute { return schema.StringAttribute{Computed: true} }
	resp.Schema = schema.Schema{
		Description: "Looks up an existing experiment by `id` (UUID or `project,name`) or by `name` (+ `project`).",
		Attributes: map[string]schema.Attribute{
			"id":              oc("UUID or `project,name`."),
			"name":            oc("Experiment name (with `project` or the provider's project)."),
			"project":         oc("Project of `name`."),
			"group":           c(),
			"profile_name":    c(),
			"profile_project": c(),
			"status":          c(),
			"url":             c(),
			"expires_at":      c(),
			"nodes": schema.ListNestedAttribute{Computed: true,
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"client_id": c(), "hostname": c(), "ipv4": c(), "ssh_host": c(),
					"ssh_port": schema.Int64Attribute{Computed: true},
					"ssh_user": c(), "status": c(), "state": c(),
				}}},
		},
	}
}

func (d *experimentDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m experimentDataModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if d.pd == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	id := m.ID.ValueString()
	if id == "" {
		project := m.Project.ValueString()
		if project == "" {
			project = d.pd.project
		}
		if m.Name.ValueString() == "" || project == "" {
			resp.Diagnostics.AddError("Which CloudLab experiment?",
				"Set `id` (UUID or project,name), or `name` with `project` (or the provider's project).")
			return
		}
		id = project + "," + m.Name.ValueString()
	}
	exp, err := d.pd.client.GetExperiment(ctx, id)
	if err != nil {
		resp.Diagnostics.AddError("Cannot read CloudLab experiment "+id, err.Error())
		return
	}
	m.ID = types.StringValue(exp.ID)
	m.Name = stringOrNull(exp.Name)
	m.Project = stringOrNull(exp.Project)
	m.Group = stringOrNull(exp.Group)
	m.ProfileName = stringOrNull(exp.ProfileName)
	m.ProfileProject = stringOrNull(exp.ProfileProject)
	m.Status = types.StringValue(exp.Status)
	m.URL = stringOrNull(exp.URL)
	m.ExpiresAt = stringOrNull(exp.ExpiresAt)
	nodes, diags := experimentNodes(ctx, d.pd.client, exp)
	resp.Diagnostics.Append(diags...)
	m.Nodes = nodes
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
