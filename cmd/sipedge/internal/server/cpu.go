package server

import "runtime"

func numCPU() int { return runtime.NumCPU() }
