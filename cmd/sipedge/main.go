// Command sipedge is the sipedge SIP B2BUA and edge SBC.
//
//	sipedge check-msg [-transport udp|tcp] FILE...
//
// More subcommands (run, check-config) arrive with the server.
package main

import (
	"fmt"
	"io"
	"os"
)

const usage = `usage:
  sipedge check-msg [-transport udp|tcp] FILE...   check received messages as the server would
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
	case "check-msg":
		return checkMsgCmd(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "sipedge: unknown command %q\n%s", args[0], usage)
	return 2
}
