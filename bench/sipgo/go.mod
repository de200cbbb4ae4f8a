module github.com/sipedge/sipedge/bench/sipgo

go 1.26

require github.com/emiago/sipgo v1.7.3

require (
	github.com/gobwas/httphead v0.1.0 // indirect
	github.com/gobwas/pool v0.2.1 // indirect
	github.com/gobwas/ws v1.3.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	golang.org/x/sync v0.16.0 // indirect
	golang.org/x/sys v0.24.0 // indirect
)
