// Command themis-driver is the themis Nomad task driver plugin. Nomad starts
// it from its plugin dir; the agent config names it with
// `plugin "themis-driver" { config { ... } }` and jobspecs use
// `driver = "themis"`. See package driver for the config and behaviour.
package main

import (
	"context"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins"

	"github.com/themis-nomad/themis/driver"
)

func main() {
	plugins.ServeCtx(func(ctx context.Context, logger hclog.Logger) interface{} {
		return driver.New(ctx, logger)
	})
}
