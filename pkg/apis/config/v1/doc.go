// Package v1 is the versioned form of gputopo's plugin arguments, as
// written in a KubeSchedulerConfiguration:
//
//	pluginConfig:
//	- name: GPUTopology
//	  args:
//	    apiVersion: gputopo.io/v1
//	    kind: GPUTopologyArgs
//	    topology: {enabled: true, weight: 1}
//	    searchBudget: 20000
//
// Every field is optional; Default fills what is left out.
package v1
