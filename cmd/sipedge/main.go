// Command sipedge is the sipedge SIP B2BUA and edge SBC.
//
//	sipedge run [-config FILE]           run the server (default: the embedded example config)
//	sipedge check-config [-config FILE] [-redact]  validate a config and print it with its defaults
//	sipedge check-msg [-transport udp|tcp] FILE...
//	sipedge route -to NUMBER [-from NUMBER] [-trunk NAME] [-config FILE] [-admin URL] [-json]
package main

import (
	"fmt"
	"io"
	"os"
)

const usage = `usage:
  sipedge run [-config FILE]                       run sipedge (default: the embedded example config)
  sipedge check-config [-config FILE] [-redact]    validate a config and print the effective config
  sipedge check-msg [-transport udp|tcp] FILE...   check received messages as the server would
  sipedge route -to NUMBER [-from NUMBER] [-trunk NAME] [-call-id ID] [-config FILE] [-admin URL] [-json]
                                                   where a call would go, and why, without placing it
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches a subcommand and returns the process exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return runCmd(args[1:], stderr)
	case "check-config":
		return checkConfigCmd(args[1:], stdout, stderr)
	case "check-msg":
		return checkMsgCmd(args[1:], stdout, stderr)
	case "route":
		return routeCmd(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "sipedge: unknown command %q\n%s", args[0], usage)
	return 2
}
