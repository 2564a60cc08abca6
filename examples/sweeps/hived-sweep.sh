#!/bin/sh
# The HiveD load sweep of docs/hived.md: the full Philly trace, fifo inside
# each VC, on Philly-like clusters of SIZES GPUs (480 is the philly preset),
# each with its VC config from themis vcs, in every virtual-cluster mode.
# Usage: examples/sweeps/hived-sweep.sh THEMIS PHILLY_CSV OUT [SIZES] [MODES]
# then: python3 examples/sweeps/hived-table.py OUT
set -eu
themis=$1 trace=$2 out=$3
sizes=${4:-"480 960 1440"}
modes=${5:-"hived hived-overflow quota quota-yarn quota-gandiva"}
for n in $sizes; do
	if [ "$n" = 480 ]; then cl=philly vc=examples/philly-vcs.hcl; else cl=philly-$n vc=examples/philly-$n-vcs.hcl; fi
	for m in $modes; do
		"$themis" sim -quiet --trace "$trace" --cluster "$cl" --policy fifo \
			--vc-config "$vc" --vc-mode "$m" --out "$out/$n-$m"
	done
done
