// Command terraform-provider-cloudlab is a Terraform provider for the CloudLab Portal API.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/harness-testbed/terraform-provider-cloudlab/internal/provider"
)

// version is set by the build (-ldflags "-X main.version=...").
var version = "0.1.0"

func main() {
	debug := flag.Bool("debug", false, "run with support for debuggers like delve")
	flag.Parse()
	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{
		Address: "registry.terraform.io/harness/cloudlab",
		Debug:   *debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
