//go:build tools

// Package tools pins helm so that scripts/build-helm.sh builds it from this module's go.sum.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
