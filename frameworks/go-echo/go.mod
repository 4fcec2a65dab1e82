module fairground/go-echo

go 1.19
