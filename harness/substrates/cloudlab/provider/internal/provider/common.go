package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/harness-testbed/terraform-provider-cloudlab/internal/client"
)

// providerDataFrom converts the opaque ProviderData of a Configure call.
func providerDataFrom(data any, diags *diag.Diagnostics) *providerData {
	if data == nil {
		return nil // provider not configured yet (validation)
	}
	pd, ok := data.(*providerData)
	if !ok {
		diags.AddError("Unexpected provider data", fmt.Sprintf("got %T", data))
		return nil
	}
	return pd
}

func notConfigured(diags *diag.Diagnostics) {
	diags.AddError("CloudLab provider not configured", "The provider has no client (was Configure skipped?).")
}

// nodeAttrTypes is the object type of one element of `nodes`.
var nodeAttrTypes = map[string]attr.Type{
	"client_id": types.StringType,
	"hostname":  types.StringType,
	"ipv4":      types.StringType,
	"ssh_host":  types.StringType,
	"ssh_port":  types.Int64Type,
	"ssh_user":  types.StringType,
	"status":    types.StringType,
	"state":     types.StringType,
}

var nodeObjectType = types.ObjectType{AttrTypes: nodeAttrTypes}

type nodeModel struct {
	ClientID types.String `tfsdk:"client_id"`
	Hostname types.String `tfsdk:"hostname"`
	IPv4     types.String `tfsdk:"ipv4"`
	SSHHost  types.String `tfsdk:"ssh_host"`
	SSHPort  types.Int64  `tfsdk:"ssh_port"`
	SSHUser  types.String `tfsdk:"ssh_user"`
	Status   types.String `tfsdk:"status"`
	State    types.String `tfsdk:"state"`
}

// nodesValue turns client nodes into the `nodes` list value.
func nodesValue(ctx context.Context, nodes []client.NodeInfo) (types.List, diag.Diagnostics) {
	ms := make([]nodeModel, 0, len(nodes))
	for _, n := range nodes {
		ms = append(ms, nodeModel{
			ClientID: types.StringValue(n.ClientID), Hostname: types.StringValue(n.Hostname),
			IPv4: types.StringValue(n.IPv4), SSHHost: types.StringValue(n.SSHHost),
			SSHPort: types.Int64Value(n.SSHPort), SSHUser: types.StringValue(n.SSHUser),
			Status: types.StringValue(n.Status), State: types.StringValue(n.State),
		})
	}
	return types.ListValueFrom(ctx, nodeObjectType, ms)
}

// experimentNodes reads the nodes of exp, with the manifests when the experiment is
// ready. A manifest that cannot be read only costs the SSH details (hostname:22 is used).
func experimentNodes(ctx context.Context, c *client.Client, exp *client.Experiment) (types.List, diag.Diagnostics) {
	var diags diag.Diagnostics
	var manifests map[string]string
	if exp.Status == client.StatusReady {
		m, err := c.GetManifests(ctx, exp.ID)
		if err != nil {
			diags.AddWarning("CloudLab manifests unavailable",
				"Using hostname:22 as SSH endpoint of every node: "+err.Error())
		}
		manifests = m
	}
	nodes, errs := client.BuildNodes(exp, manifests)
	for _, err := range errs {
		diags.AddWarning("CloudLab manifest not understood", err.Error())
	}
	l, d := nodesValue(ctx, nodes)
	diags.Append(d...)
	return l, diags
}

// stringOrNull maps "" to null.
func stringOrNull(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}
