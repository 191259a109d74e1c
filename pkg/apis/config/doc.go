// Package config holds the internal, defaulted form of gputopo's scheduler
// plugin arguments. The versioned form users write in a
// KubeSchedulerConfiguration lives in package v1; validation in package
// validation.
package config
