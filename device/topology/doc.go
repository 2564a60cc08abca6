// Package topology reads themis topology files and encodes GPU layouts for
// Nomad device attributes. It does no I/O beyond reading the file.
//
// A topology file (HCL) describes one or more nodes and their GPUs:
//
//	node "dev-node" {
//	  rack = "rack0"                          # optional, default "rack0"
//	  gpu {
//	    index      = 0                        # node-local index, >= 0, unique in the node
//	    model      = "A100-SXM4-80GB"         # non-empty, no '/'
//	    memory_mib = 81920                    # > 0
//	    path       = "socket0/switch0/pair0"  # cells outermost first; "" = directly under the node
//	    id         = "GPU-..."                # optional, default "SIM-<node>-<index>"; unique in the file
//	    healthy    = false                    # optional, default true
//	    health_description = "XID 79"         # optional, shown when unhealthy
//	    pci_bus_id = "00000000:3B:00.0"       # optional
//	  }
//	}
//
// Parse reports every problem at once, each naming the field, the value and
// the file:line it sits at. EncodeLayout and DecodeLayout carry the GPUs'
// index, ID and path through a Nomad device group attribute (AttrLayout).
package topology
