package atp
