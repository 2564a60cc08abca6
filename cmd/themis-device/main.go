// Command themis-device is the themis Nomad device plugin. Install it in the
// Nomad client's plugin_dir and enable it in the agent config:
//
//	plugin "themis-device" {
//	  config {
//	    backend       = "sim"
//	    topology_file = "/etc/themis/topology.hcl"
//	  }
//	}
//
// See package github.com/themis-nomad/themis/device for the options.
package main

import (
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/plugins"

	"github.com/themis-nomad/themis/device"
)

func main() {
	plugins.Serve(func(logger hclog.Logger) interface{} {
		return device.NewPlugin(logger)
	})
}
