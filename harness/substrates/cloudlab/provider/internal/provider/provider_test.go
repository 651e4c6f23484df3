package provider

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/harness-testbed/terraform-provider-cloudlab/internal/fakeportal"
)

const testToken = "tok-SECRET-abcdef123456"

// configure runs the real provider Configure with the given attributes (others null).
func configure(t *testing.T, attrs map[string]tftypes.Value) (*providerData, diag.Diagnostics) {
	t.Helper()
	ctx := context.Background()
	p := New("test")()
	var sresp provider.SchemaResponse
	p.Schema(ctx, provider.SchemaRequest{}, &sresp)
	typ := sresp.Schema.Type().TerraformType(ctx).(tftypes.Object)
	vals := map[string]tftypes.Value{}
	for name, at := range typ.AttributeTypes {
		if v, ok := attrs[name]; ok {
			vals[name] = v
		} else {
			vals[name] = tftypes.NewValue(at, nil)
		}
	}
	req := provider.ConfigureRequest{Config: tfsdk.Config{Schema: sresp.Schema, Raw: tftypes.NewValue(typ, vals)}}
	var resp provider.ConfigureResponse
	p.Configure(ctx, req, &resp)
	pd, _ := resp.ResourceData.(*providerData)
	return pd, resp.Diagnostics
}

func str(s string) tftypes.Value { return tftypes.NewValue(tftypes.String, s) }

func TestConfigureMissingTokenNamesBoth(t *testing.T) {
	t.Setenv(EnvToken, "")
	_, diags := configure(t, nil)
	if !diags.HasError() {
		t.Fatal("want an error without token")
	}
	d := diags.Errors()[0].Detail()
	if !strings.Contains(d, "`token`") || !strings.Contains(d, EnvToken) {
		t.Errorf("diagnostic should name both token and %s: %s", EnvToken, d)
	}
}

func TestConfigureEnvAndDefaults(t *testing.T) {
	t.Setenv(EnvToken, testToken)
	t.Setenv(EnvPortalURL, "")
	pd, diags := configure(t, map[string]tftypes.Value{"project": str("proj")})
	if diags.HasError() || pd == nil || pd.poll != DefaultPollInterval || pd.project != "proj" {
		t.Fatalf("%v %+v", diags, pd)
	}
	_, diags = configure(t, map[string]tftypes.Value{"poll_interval": str("soon")})
	if !diags.HasError() {
		t.Error("bad poll_interval accepted")
	}
}

// testEnv is a fake portal plus a configured providerData pointing at it.
func testEnv(t *testing.T, token string) (*fakeportal.Portal, *providerData, diag.Diagnostics) {
	t.Helper()
	p := fakeportal.New(testToken)
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	t.Setenv(EnvToken, "")
	pd, diags := configure(t, map[string]tftypes.Value{"portal_url": str(srv.URL), "token": str(token),
		"project": str("proj"), "poll_interval": str("1ms")})
	if pd != nil {
		pd.poll = time.Millisecond
	}
	return p, pd, diags
}

func TestTokenNeverInDiagnostics(t *testing.T) {
	bad := "tok-WRONG-zyxwvu987654"
	p, pd, diags := testEnv(t, bad)
	p.EchoToken = true
	if diags.HasError() {
		t.Fatal(diags)
	}
	r := &experimentResource{pd: pd}
	m := newPlan("exp1", nil)
	_, diags = r.create(context.Background(), &m, time.Minute, time.Minute)
	if !diags.HasError() {
		t.Fatal("want 401 error")
	}
	found := false
	for _, d := range diags {
		text := d.Summary() + " " + d.Detail()
		found = found || strings.Contains(text, "refused the API token")
		if strings.Contains(text, bad) || strings.Contains(text, testToken) {
			t.Fatalf("token in diagnostic: %s", text)
		}
	}
	if !found {
		t.Errorf("diagnostic should say the token was refused: %v", diags)
	}
}

func newPlan(name string, bindings map[string]string) experimentModel {
	b := types.MapNull(types.StringType)
	if bindings != nil {
		b, _ = types.MapValueFrom(context.Background(), types.StringType, bindings)
	}
	return experimentModel{Name: types.StringValue(name), Project: types.StringUnknown(),
		Group: types.StringUnknown(), ProfileName: types.StringValue("small"),
		ProfileProject: types.StringValue("proj"), Bindings: b, Duration: types.Int64Value(4),
		SSHPubKey: types.StringNull(), ID: types.StringUnknown(), Status: types.StringUnknown(),
		URL: types.StringUnknown(), ExpiresAt: types.StringUnknown(), Nodes: types.ListUnknown(nodeObjectType)}
}
