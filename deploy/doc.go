// Package deploy holds no Go code: it is the files an operator deploys
// petrel with (the systemd unit, the compose example, the reverse proxy
// configurations, the Grafana dashboard and the Prometheus alert rules),
// and the tests that check them against a running relay.
package deploy
