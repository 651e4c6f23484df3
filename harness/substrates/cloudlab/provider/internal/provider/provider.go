// Package provider is the terraform-plugin-framework provider for the CloudLab Portal API.
package provider

import (
	"context"
	"os"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/harness-testbed/terraform-provider-cloudlab/internal/client"
)

// Defaults of the provider configuration.
const (
	DefaultPortalURL    = "https://boss.emulab.net:43794"
	DefaultPollInterval = 15 * time.Second
	EnvPortalURL        = "CLOUDLAB_PORTAL_URL"
	EnvToken            = "CLOUDLAB_TOKEN"
)

// providerData is handed to every resource and data source.
type providerData struct {
	client  *client.Client
	project string
	poll    time.Duration
}

type cloudlabProvider struct{ version string }

type providerModel struct {
	PortalURL    types.String `tfsdk:"portal_url"`
	Token        types.String `tfsdk:"token"`
	Project      types.String `tfsdk:"project"`
	Insecure     types.Bool   `tfsdk:"insecure"`
	PollInterval types.String `tfsdk:"poll_interval"`
}

// New returns the provider factory for providerserver.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &cloudlabProvider{version: version} }
}

func (p *cloudlabProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "cloudlab"
	resp.Version = p.version
}

func (p *cloudlabProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "CloudLab Portal REST API (experiments, profiles, node actions).",
		Attributes: map[string]schema.Attribute{
			"portal_url": schema.StringAttribute{Optional: true,
				Description: "Portal API base URL; env " + EnvPortalURL + "; default " + DefaultPortalURL + "."},
			"token": schema.StringAttribute{Optional: true, Sensitive: true,
				Description: "API token (sent only as the X-Api-Token header); env " + EnvToken + "."},
			"project": schema.StringAttribute{Optional: true,
				Description: "Default project for resources that do not set one."},
			"insecure": schema.BoolAttribute{Optional: true,
				Description: "Skip TLS certificate verification (a local portal)."},
			"poll_interval": schema.StringAttribute{Optional: true,
				Description: "How often to poll for status changes, a Go duration; default 15s."},
		},
	}
}

func (p *cloudlabProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var m providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if m.Token.IsUnknown() || m.PortalURL.IsUnknown() {
		resp.Diagnostics.AddError("CloudLab provider configured with unknown values",
			"`token` and `portal_url` must be known at plan time (not computed by another resource).")
		return
	}
	token := os.Getenv(EnvToken)
	if v := m.Token.ValueString(); v != "" {
		token = v
	}
	if token == "" {
		resp.Diagnostics.AddAttributeError(path.Root("token"), "Missing CloudLab API token",
			"Set `token` in the cloudlab provider block or the "+EnvToken+" environment variable.")
		return
	}
	base := DefaultPortalURL
	if v := os.Getenv(EnvPortalURL); v != "" {
		base = v
	}
	if v := m.PortalURL.ValueString(); v != "" {
		base = v
	}
	poll := DefaultPollInterval
	if v := m.PollInterval.ValueString(); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			resp.Diagnostics.AddAttributeError(path.Root("poll_interval"), "Invalid poll_interval",
				"poll_interval must be a positive Go duration such as \"15s\", not "+v+".")
			return
		}
		poll = d
	}
	c, err := client.New(client.Config{BaseURL: base, Token: token, Insecure: m.Insecure.ValueBool(),
		UserAgent: "terraform-provider-cloudlab/" + p.version})
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("portal_url"), "Invalid CloudLab provider configuration", err.Error())
		return
	}
	tflog.Debug(ctx, "cloudlab provider configured", map[string]any{"portal_url": base, "poll_interval": poll.String()})
	pd := &providerData{client: c, project: m.Project.ValueString(), poll: poll}
	resp.ResourceData = pd
	resp.DataSourceData = pd
}

func (p *cloudlabProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{newExperimentResource, newProfileResource, newNodeActionResource}
}

func (p *cloudlabProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{newExperimentDataSource}
}
