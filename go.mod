module github.com/sipedge/sipedge

go 1.26
